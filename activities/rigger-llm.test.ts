import { describe, expect, it } from 'vitest';
import { GatewayRequestError, type GatewayControlClient } from '../src/gateway/control-client.js';
import type { Rollout, StatusChange } from '../src/rollouts/rollout.js';
import { riggerLlm } from './rigger-llm.js';

/** The gateway's rollout API, as much of it as finishing the rigger's rollout uses. */
function gatewayWith(status: Rollout['status'] | 'missing') {
  const changes: StatusChange[] = [];
  const gateway = {
    getRollout: async (id: string) => {
      if (status === 'missing') throw new GatewayRequestError(404, 'rollout_not_found', `rollout ${id} does not exist`);
      return { id, status } as Rollout;
    },
    setStatus: async (_id: string, change: StatusChange) => {
      changes.push(change);
      return {} as Rollout;
    },
  } as unknown as GatewayControlClient;
  return { gateway, changes };
}

const settings = { model: 'production', maxTokens: 64 };

describe("the rigger's rollout", () => {
  it('is ended by a retried activity from the recorded report, when the try that asked died before ending it', async () => {
    const ok = gatewayWith('running');
    await riggerLlm(ok.gateway, settings, 'r', 2).finish({});
    expect(ok.changes).toEqual([{ status: 'succeeded', reason: "the rigger's report is recorded" }]);

    const failed = gatewayWith('running');
    await riggerLlm(failed.gateway, settings, 'r', 2).finish({ error: 'the LLM call failed: 503' });
    expect(failed.changes).toEqual([
      { status: 'failed', failureClass: 'infrastructure', reason: 'the LLM call failed: 503' },
    ]);
  });

  it('is left alone when it ended already, was never made, or the report asked no LLM', async () => {
    for (const [status, recorded] of [
      ['succeeded', {}],
      ['missing', { error: 'this worker has no gateway to ask the LLM through (gateway settings)' }],
      ['running', undefined],
    ] as const) {
      const g = gatewayWith(status);
      await riggerLlm(g.gateway, settings, 'r', 2).finish(recorded);
      expect(g.changes).toEqual([]);
    }
  });
});
