import { randomUUID } from 'node:crypto';
import type { RolloutStatus } from '../../src/rollouts/rollout.js';
import type { TraceStore } from '../../src/store/trace-store.js';

/**
 * A rollout of `batchId` (null: of no batch) journaled as a harness and its verifier leave one:
 * `calls` answered calls (default 1), a shadow call of the first when `shadow`, a reward, ending
 * in `status` (default succeeded; left running when unfinished). Returns when it last changed.
 */
export async function journaledRollout(
  store: TraceStore,
  id: string,
  batchId: string | null,
  options: { status?: RolloutStatus; calls?: number; shadow?: boolean } = {},
): Promise<number> {
  const { status = 'succeeded', calls = 1, shadow = false } = options;
  await store.createRollout({ id, taskId: 't', metadata: batchId === null ? {} : { batchId, sample: 0 } });
  await store.setRolloutStatus(id, { status: 'running' }, 'admin');
  const callIds: string[] = [];
  for (let t = 0; t < calls; t++) {
    const callId = randomUUID();
    callIds.push(callId);
    const request = { model: 'production', messages: [{ role: 'user', content: `turn ${t} ${'data '.repeat(50)}` }] };
    await store.beginCall({
      id: callId,
      rolloutId: id,
      attempt: 1,
      endpoint: 'chat.completions',
      policyVersion: 'v1',
      backendUrl: 'http://b',
      stream: false,
      requestReceived: request,
      requestSent: request,
      startedAt: Date.now(),
    });
    await store.finishCall(callId, {
      response: { choices: [{ message: { role: 'assistant', content: 'ok' } }] },
      promptIds: [1, 2, 3 + t],
      choices: [{ completionIds: [7, 8], logprobs: [-0.1, -0.2], finishReason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 2 },
      upstreamStatus: 200,
      errorClass: null,
      errorMessage: null,
      ttftMs: 1,
      latencyMs: 2,
    });
  }
  if (shadow && callIds[0]) {
    await store.recordShadowCall({
      id: `shadow-${id}`,
      primaryCallId: callIds[0],
      rolloutId: id,
      attempt: 1,
      candidateVersion: 'v2',
      incumbentVersion: 'v1',
      endpoint: 'chat.completions',
      backendUrl: 'http://b',
      requestSent: { model: 'v2', messages: [] },
      response: null,
      choices: [],
      status: 'error',
      errorClass: 'upstream_unreachable',
      errorMessage: 'refused',
      upstreamStatus: null,
      latencyMs: 1,
      startedAt: Date.now(),
    });
  }
  await store.appendEvent(id, 1, { type: 'reward', value: 1, components: {} }, 'admin');
  if (status !== 'running') await store.setRolloutStatus(id, { status }, 'admin');
  return Date.parse((await store.getRollout(id))!.updatedAt);
}

/** A moment after every change so far: waits for the clock to pass `t` (the stores keep milliseconds). */
export async function after(t: number): Promise<number> {
  while (Date.now() <= t) await new Promise((resolve) => setImmediate(resolve));
  return Date.now();
}
