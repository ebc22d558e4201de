import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { validateConfig } from '../../src/config/load.js';
import { decodeBatch } from '../../src/samples/batch-artifact.js';
import { DataQualityError, runBatchStage } from '../../src/samples/stage.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

// From harness calls through the real gateway to a batch artifact: the journal is the only input.
let t: TestGateway;
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-batch-stage-'));
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

const tools = [
  { type: 'function' as const, function: { name: 'calculator', parameters: { type: 'object', properties: {} } } },
];

/** A two-turn tool-use episode, as a harness runs it, then the verifier's reward. */
async function episode(id: string, taskId: string, reward: number, harnessSays?: number) {
  const r = await t.rollout({ id, taskId });
  const messages: any[] = [{ role: 'user', content: `${taskId}: 6*7` }];
  const first = await r.client.chat.completions.create({ model: 'production', messages, tools });
  messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: 'call_0', content: '42' });
  await r.client.chat.completions.create({ model: 'production', messages });
  if (harnessSays !== undefined) {
    await fetch(`${r.baseUrl.replace('/v1', '')}/api/rollouts/${id}/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${r.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'reward', value: harnessSays }),
    });
  }
  await t.admin('POST', `/api/rollouts/${id}/events`, {
    type: 'reward',
    value: reward,
    components: { success: reward },
  });
  await t.admin('POST', `/api/rollouts/${id}/status`, { status: 'succeeded' });
}

describe('the batch stage on a journal written by the gateway', () => {
  it('writes a batch whose sequences are the journaled calls, merged, with a data-quality report', async () => {
    await episode('s-0', 'task-a', 1, 1);
    await episode('s-1', 'task-a', 0, 1);
    await episode('s-2', 'task-a', 1);
    const settings = validateConfig(
      { samples: { estimator: 'grpo', lossAggregation: 'rollout-mean' } },
      'test',
    ).samples;
    const artifacts = new LocalArtifactStore(path.join(dir, 'artifacts'));
    const result = await runBatchStage(
      { iteration: 1, policyVersion: 'policy-v1', configHash: 'cfg', rolloutIds: ['s-0', 's-1', 's-2'] },
      { store: t.store, artifacts, settings },
    );

    expect(result.summary).toMatchObject({ rolloutsUsed: 3, rolloutsExcluded: 0, sequences: 3, mergeRate: 1 });
    const decoded = decodeBatch(await artifacts.get(result.batch.uri, result.batch));
    expect(decoded.metadata).toMatchObject({
      iteration: '1',
      policy_version: 'policy-v1',
      content_hash: result.batch.contentHash,
    });
    // Each sequence is the second call's prompt followed by its completion: the first call merged into it.
    for (const sequence of decoded.sequences) {
      const [first, second] = await t.store.listCalls(sequence.rolloutId);
      expect(sequence.ids).toEqual([...second!.promptIds!, ...second!.choices![0]!.completionIds!]);
      const trained = sequence.ids.filter((_, i) => sequence.lossMask[i] === 1);
      expect(trained).toEqual([...first!.choices![0]!.completionIds!, ...second!.choices![0]!.completionIds!]);
      expect(sequence.oldLogprobs.filter((_, i) => sequence.lossMask[i] === 1)).toEqual(
        [...first!.choices![0]!.logprobs!, ...second!.choices![0]!.logprobs!].map(Math.fround),
      );
    }
    const advantage = (id: string) => decoded.sequences.find((s) => s.rolloutId === id)!.advantages[0]!;
    expect(advantage('s-0')).toBeGreaterThan(0);
    expect(advantage('s-1')).toBeLessThan(0);

    const report = JSON.parse(readFileSync(fileURLToPath(result.report.uri), 'utf8'));
    expect(report.rewardDisagreement).toEqual({ compared: 2, disagreeing: 1, rate: 0.5, rolloutIds: ['s-1'] });
    expect(report.rewards).toMatchObject({ count: 3, mean: 2 / 3 });
  });

  it('refuses the batch, keeping the report, when the evidence fails a threshold', async () => {
    const settings = validateConfig({ samples: { thresholds: { maxRewardDisagreementRate: 0.2 } } }, 'test').samples;
    const artifacts = new LocalArtifactStore(path.join(dir, 'strict'));
    const error = await runBatchStage(
      { iteration: 2, policyVersion: 'policy-v1', configHash: 'cfg', rolloutIds: ['s-0', 's-1', 's-2'] },
      { store: t.store, artifacts, settings },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DataQualityError);
    expect((error as DataQualityError).problems).toEqual([
      'reward disagreement rate 0.500 is above samples.thresholds.maxRewardDisagreementRate 0.2',
    ]);
    expect(
      JSON.parse(readFileSync(fileURLToPath((error as DataQualityError).reportUri), 'utf8')).rewardDisagreement
        .disagreeing,
    ).toBe(1);
  });
});
