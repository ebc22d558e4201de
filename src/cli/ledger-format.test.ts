import { describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../ledger/ledger.js';
import { formatLedger } from './ledger-format.js';

const environment = { taskSet: 'tasks1', verifier: 'verifier1', config: 'config1', module: 'files@1:abc' };
const row = (id: string, kind: LedgerEntry['kind'], more: Partial<LedgerEntry> = {}): LedgerEntry => ({
  id,
  kind,
  runId: 'r',
  iteration: 1,
  decisionId: null,
  batchIds: [],
  model: { policyVersion: 'r.v1', parent: 'v0' },
  harness: { version: 'h1' },
  environment,
  metrics: {
    rollouts: 4,
    acceptedRate: 0.5,
    tokens: 100,
    elapsedSeconds: 3,
    toolErrors: 0,
    retries: 0,
    interventions: 0,
    irreversibleFailures: 0,
  },
  at: '2025-01-01T00:00:00Z',
  ...more,
});
const variant = (id: string, kept: boolean, reason: string): LedgerEntry =>
  row(`r.variant.${id}`, 'variant', {
    environment: { ...environment, variants: [id] },
    variant: {
      name: `v-${id}`,
      id,
      origin: 'rigger',
      changes: 'paging',
      why: 'gives up',
      kept,
      reason,
      samples: 4,
      scored: 4,
      solved: kept ? 2 : 4,
      record: 'file:///x',
    },
  });

describe('rein ledger with variant checks', () => {
  const entries = [
    variant('ab12', true, 'solved by 2 of 4 samples: kept'),
    row('r.it1', 'iteration', { environment: { ...environment, variants: ['ab12'] } }),
    row('r.it1.release', 'release', { decisionId: 'd1', model: { policyVersion: 'r.v1', parent: 'v0' } }),
    variant('cd34', false, 'solved by every sample of 4 samples: too easy to teach anything'),
    row('r.it2.release', 'release', {
      decisionId: 'd2',
      model: { policyVersion: 'r.v2', parent: 'r.v1' },
      metrics: { ...row('x', 'release').metrics, acceptedRate: 0.75 },
    }),
  ];
  const text = formatLedger(entries, new Map([['d1', 'pass']]));

  it('keeps a row per entry in the table, and names each variant with its verdict and reason', () => {
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^entry\s+kind\s+model/);
    expect(lines.filter((l) => /^r\.variant\.\w+\s+variant\s/.test(l))).toHaveLength(2);
    expect(lines.filter((l) => /^r\.it\d(\.release)?\s+(iteration|release)\s/.test(l))).toHaveLength(3);
    expect(text).toContain(
      'Variant checks:\n' +
        '  r.variant.ab12: v-ab12 (rigger) kept: solved by 2 of 4 samples: kept\n' +
        '  r.variant.cd34: v-cd34 (rigger) rejected: solved by every sample of 4 samples: too easy to teach anything\n',
    );
    // The legend reads the training row's variants, not a variant row's own.
    expect(text).toMatch(/environment \w{8}: .*module files@1:abc, variants ab12\n/);
  });

  it('compares the last two releases only, whatever variant rows come between them', () => {
    expect(text).toContain('Between the last two releases:\n');
    expect(text).toContain('  r.it1.release → r.it2.release: accepted 50% → 75%');
    expect(text).not.toMatch(/→ r\.variant/);
  });

  it('shows no variant section for runs without an environment', () => {
    expect(formatLedger([row('r.it1', 'iteration')])).not.toContain('Variant checks');
  });
});
