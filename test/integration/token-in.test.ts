import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { loadConfig } from '../../src/config/load.js';
import { SAMPLES_MERGE } from '../../src/rollouts/rollout.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { runBatchStage } from '../../src/samples/stage.js';
import type { CallRecord } from '../../src/store/trace-store.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { localPolicyTrainer } from '../../src/training/local-policy-trainer.js';
import { exampleDir } from '../helpers/example-config.js';

/**
 * Issue 30's token in, end to end on the embedded stack: a harness that sends its history back
 * re-serialised (as LangChain does) splits every multi-turn rollout under exact merging; with
 * `samples.merge: tito` the gateway sends the continued calls to the policy server as token ids,
 * the model's own ids spliced in, and every rollout is one sequence again.
 */
const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-token-in-'));
const { config } = loadConfig({ file: path.join(exampleDir, 'rein.yaml'), env: {} });
const base = config.run.base.checkpoint as string;
const example = programSpec(config.harness?.local as NonNullable<NonNullable<typeof config.harness>['local']>);
const harness = {
  ...example,
  args: [path.resolve(import.meta.dirname, '../fixtures/harnesses/reserializing-agent.mjs'), '{task}', '{output}'],
  // Seeded sampling: the rollouts of a task differ (a reward signal to train on) and are the same on every run.
  env: { ...example.env, AGENT_SEED: '7' },
};
// Products (the base policy reaches for its calculator on them, so rollouts run several turns) and sums it often
// answers right, so that rewards differ within a task's group: something to train on.
const trainTasks = loadTaskSet(config.run.trainTasks as string).tasks;
const tasks = [
  ...trainTasks.filter((task) => / times /.test(String(task.question))).slice(0, 2),
  ...trainTasks.filter((task) => / more\?/.test(String(task.question))).slice(0, 2),
];

let stack: EmbeddedStack;
let tokenizer: ChatTokenizer;
beforeAll(async () => {
  stack = await startEmbeddedStack({ workDir, baseCheckpoint: base });
  tokenizer = ChatTokenizer.fromDirectory(base);
});
afterAll(async () => {
  await stack?.close();
  rmSync(workDir, { recursive: true, force: true });
});

async function rollOutAndBatch(merge: 'exact' | 'tito') {
  const batchId = `token-in-${merge}`;
  const outcomes = await runRollouts(
    {
      batchId,
      tasks,
      samplesPerTask: 2,
      mode: 'train',
      policyVersion: 'v0',
      hiddenFields: config.rollouts.hiddenFields,
      rewardWeights: config.rollouts.rewardWeights,
      concurrency: 6,
      maxAttempts: 1,
      workDir: path.join(workDir, batchId),
      metadata: { [SAMPLES_MERGE]: merge },
    },
    { gateway: stack.control, harness: localExecutor(harness), verifier: programSpec(config.verifier!) },
  );
  expect(outcomes.map((o) => o.status)).toEqual(outcomes.map(() => 'succeeded'));
  const calls = new Map<string, CallRecord[]>();
  for (const o of outcomes) calls.set(o.rolloutId, await stack.store.listCalls(o.rolloutId));
  const result = await runBatchStage(
    { iteration: 1, policyVersion: 'v0', configHash: batchId, rolloutIds: outcomes.map((o) => o.rolloutId) },
    {
      store: stack.store,
      artifacts: new LocalArtifactStore(path.join(workDir, batchId, 'artifacts')),
      settings: { ...config.samples, merge, zeroVarianceGroups: 'keep' },
      tokenizer,
    },
  );
  return { outcomes, calls, result };
}

describe('token in (samples.merge: tito) through the gateway to the embedded policy', () => {
  it(
    "keeps a re-serialising harness's rollouts one sequence, the model's own ids spliced in",
    { timeout: 120_000 },
    async () => {
      const exact = await rollOutAndBatch('exact');
      const multiTurn = [...exact.calls.values()].filter((c) => c.length > 1).length;
      expect(multiTurn).toBeGreaterThan(0);
      // As text, the re-serialised arguments break the prefix: one sequence per call, the cause named.
      expect(exact.result.summary.mergeRate).toBe(0);
      expect(exact.result.summary.sequences).toBe([...exact.calls.values()].reduce((n, c) => n + c.length, 0));

      const tito = await rollOutAndBatch('tito');
      expect(tito.result.summary).toMatchObject({ mergeRate: 1, sequences: tito.outcomes.length, driftRate: 0 });
      for (const calls of tito.calls.values()) {
        for (const [i, call] of calls.entries()) {
          expect(call.status).toBe('ok');
          if (i === 0) continue;
          // The call went token in: its prompt starts with the previous prompt and the ids the model generated.
          const previous = calls[i - 1] as CallRecord;
          const generated = [...(previous.promptIds ?? []), ...(previous.choices?.[0]?.completionIds ?? [])];
          expect((call.requestSent as { prompt_token_ids?: number[] }).prompt_token_ids).toEqual(call.promptIds);
          expect(call.promptIds?.slice(0, generated.length)).toEqual(generated);
          // What the harness sent back was not what the model wrote: the splice is what kept them one sequence.
          expect(tokenizer.decode(call.promptIds ?? [])).not.toBe(tokenizer.render(call.requestSent as never, true));
        }
      }
      console.log(
        `token in: ${tito.outcomes.length} rollouts; exact ${exact.result.summary.sequences} sequences (merge rate ` +
          `${exact.result.summary.mergeRate}), tito ${tito.result.summary.sequences} (merge rate ` +
          `${tito.result.summary.mergeRate}), rewards ${tito.outcomes.map((o) => o.reward).join(' ')}`,
      );

      // The run's tfjs trainer takes an update on the tito batch.
      const trainer = localPolicyTrainer({ ...config.trainer, epochs: 1 }, path.join(workDir, 'trainer-logs'));
      const outputDir = path.join(workDir, 'v1-tito');
      const batchPath = fileURLToPath(tito.result.batch.uri);
      const update = await trainer.train({ parentCheckpoint: base, batchPath, outputDir });
      expect(update).toMatchObject({ reused: false, batchContentHash: tito.result.batch.contentHash });
      expect(update.steps).toBeGreaterThan(update.skippedMinibatches);
      const weights = (dir: string) => readFileSync(path.join(dir, 'model.safetensors'));
      expect(weights(outputDir).equals(weights(base))).toBe(false);
    },
  );
});
