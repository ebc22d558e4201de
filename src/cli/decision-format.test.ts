import { describe, expect, it } from 'vitest';
import type { StoredDecision } from '../registry/policy-registry.js';
import { formatDecision } from './decision-format.js';

const stored = {
  id: 'c.vs.v0.h.2x1',
  candidate: 'c',
  incumbent: 'v0',
  verdict: 'fail',
  record: {
    evidence: { pairs: 2, tasks: 2 },
    checks: [],
    traces: 'http://127.0.0.1:16160/api/rollouts/{rolloutId}',
  },
} as unknown as StoredDecision;

describe('a gate decision on the terminal', () => {
  it("points at the rollouts' calls on the gateway as configured now, not where it listened then", () => {
    expect(formatDecision(stored, { gatewayUrl: 'http://127.0.0.1:8400' })).toContain(
      '  traces: http://127.0.0.1:8400/api/rollouts/<rollout>/calls (gateway admin key)',
    );
    // Without a config at hand, the address recorded with the decision.
    expect(formatDecision(stored)).toContain('traces: http://127.0.0.1:16160/api/rollouts/<rollout>/calls');
  });
});
