import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Completion, CompletionCreateParams } from 'openai/resources/completions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { loadConfig } from '../../src/config/load.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import type { ProgramSpec } from '../../src/rollouts/program.js';
import type { RolloutOutcome } from '../../src/rollouts/rollout-batch.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { decodeBatch } from '../../src/samples/batch-artifact.js';
import { sampleSettings } from '../../src/samples/config.js';
import type { MergeMode } from '../../src/samples/merge-modes.js';
import { runBatchStage, type BatchStageResult, type DataQualityReport } from '../../src/samples/stage.js';
import type { CallRecord } from '../../src/store/trace-store.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { localPolicyTrainer } from '../../src/training/local-policy-trainer.js';
import { exampleDir } from '../helpers/example-config.js';
import { expectOneTrainedSequence } from '../helpers/trained-sequence.js';

/**
 * Issue 29's promise, end to end: a harness written against the Responses API (the `openai`
 * client, turns chained by previous_response_id), one written against the Anthropic Messages
 * API (`@anthropic-ai/sdk`) and one against the legacy Completions API (the `openai` client, the
 * harness rendering its own prompt in the model's chat format) train like the example chat
 * harness. Each runs the example's tasks on the embedded policy through the gateway; the batch
 * stage then builds the training batch from the journal as a run does, and it must not be
 * refused: every call journaled with token ids and log-probs, every multi-turn rollout one sequence.
 */
const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-api-harnesses-'));
const { config } = loadConfig({ file: path.join(exampleDir, 'rein.yaml'), env: {} });
const base = config.run.base.checkpoint as string;
const exampleHarness = programSpec(config.harness?.local as NonNullable<NonNullable<typeof config.harness>['local']>);
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
/**
 * Greedy, as the example's held-out replay runs it (run.evalHarnessEnv): the byte-level base model
 * sampling at temperature 1 now and then writes a byte that is not UTF-8 on its own; a harness of
 * any API can only send back U+FFFD for it, a true `lossy_decode` break the merger reports. Greedy
 * decoding keeps each rollout's merge the same on every run.
 */
const greedy = (harness: ProgramSpec): ProgramSpec => ({ ...harness, env: { ...harness.env, AGENT_TEMPERATURE: '0' } });
const fixture = (file: string): ProgramSpec =>
  greedy({ ...exampleHarness, args: [path.join(fixtures, file), '{task}', '{output}'] });
const harnesses: Array<{ api: string; endpoint: string; harness: ProgramSpec }> = [
  { api: 'chat (the example harness, the control)', endpoint: 'chat.completions', harness: greedy(exampleHarness) },
  { api: 'responses (openai client.responses.create)', endpoint: 'responses', harness: fixture('responses-agent.mjs') },
  { api: 'messages (@anthropic-ai/sdk)', endpoint: 'messages', harness: fixture('anthropic-agent.mjs') },
  {
    api: 'completions (openai client.completions.create)',
    endpoint: 'completions',
    harness: fixture('completions-agent.mjs'),
  },
];
// Products: the base policy reaches for its calculator on them, so rollouts run several turns.
const tasks = loadTaskSet(config.run.trainTasks as string)
  .tasks.filter((task) => / times /.test(String(task.question)))
  .slice(0, 3);

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

/** The harness's rollouts of the tasks, two samples each, run and scored as a run's rollout set runs them. */
async function rollOut(batchId: string, harness: ProgramSpec): Promise<RolloutOutcome[]> {
  return runRollouts(
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
    },
    { gateway: stack.control, harness: localExecutor(harness), verifier: programSpec(config.verifier!) },
  );
}

const promptOf = (call: CallRecord): string => (call.requestReceived as CompletionCreateParams).prompt as string;

/** The rollout's calls journaled with ids, merged into one sequence (Responses chained, Completions resent). */
async function expectOneSequence(rolloutId: string, endpoint: string): Promise<number> {
  const calls = await stack.store.listCalls(rolloutId);
  for (const call of calls) expect(call.policyVersion).toBe('v0');
  // A Responses harness chains its turns: each call names the response before it and sends only tool results.
  if (endpoint === 'responses')
    calls.forEach((call, i) =>
      expect((call.requestReceived as { previous_response_id?: string }).previous_response_id).toBe(
        i === 0 ? undefined : (calls[i - 1]?.response as { id: string }).id,
      ),
    );
  // A Completions harness resends its conversation: each prompt is the last one and its reply's text as returned.
  if (endpoint === 'completions')
    calls.slice(1).forEach((call, i) => {
      const previous = calls[i] as CallRecord;
      const resent = promptOf(previous) + (previous.response as Completion).choices[0]?.text;
      expect(promptOf(call).startsWith(resent)).toBe(true);
    });
  expectOneTrainedSequence(rolloutId, calls, endpoint, tokenizer);
  return calls.length;
}

describe.each(harnesses)('a harness on the $api API', ({ endpoint, harness }) => {
  it(
    'trains: every call journaled with ids and log-probs, one sequence a rollout, a batch built',
    {
      timeout: 120_000,
    },
    async () => {
      const batchId = `api-${endpoint}`;
      const outcomes = await rollOut(batchId, harness);
      expect(outcomes.map((o) => [o.status, o.reason ?? null])).toEqual(outcomes.map(() => ['succeeded', null]));
      const callCounts: number[] = [];
      for (const { rolloutId } of outcomes) callCounts.push(await expectOneSequence(rolloutId, endpoint));
      // The tool loop ran: the model called its calculator and read the result back.
      const multiTurn = callCounts.filter((n) => n > 1).length;
      expect(multiTurn).toBeGreaterThan(0);

      // The batch stage as a run's buildBatch activity calls it; groups of equal rewards are kept,
      // so every rollout is in the batch whatever the base policy scored.
      const result = await runBatchStage(
        {
          iteration: 1,
          policyVersion: 'v0',
          configHash: 'api-harnesses',
          rolloutIds: outcomes.map((o) => o.rolloutId),
        },
        {
          store: stack.store,
          artifacts: new LocalArtifactStore(path.join(workDir, batchId, 'artifacts')),
          settings: { ...config.samples, zeroVarianceGroups: 'keep' },
          tokenizer,
        },
      );
      const used = outcomes.length;
      expect(result.summary).toMatchObject({ rolloutsUsed: used, rolloutsExcluded: 0, sequences: used, mergeRate: 1 });
      expect(result.summary).toMatchObject({ driftRate: 0 });
      expect(result.summary.trainedTokens).toBeGreaterThan(0);
      // The data-quality report a run keeps beside its batch counts every call (issue 29: `calls.total 0`).
      const report = JSON.parse(readFileSync(fileURLToPath(result.report.uri), 'utf8')) as DataQualityReport;
      const calls = callCounts.reduce((a, b) => a + b, 0);
      expect(report.calls).toEqual({
        total: calls,
        merged: calls - used,
        skippedWithoutTokenIds: 0,
        missingLogprobs: 0,
      });
      expect(report.mismatchCauses).toEqual({});
      console.log(
        `${endpoint}: ${used} rollouts (${multiTurn} multi-turn), ${calls} calls, ${result.summary.sequences} ` +
          `sequences, merge rate ${result.summary.mergeRate}, ${result.summary.trainedTokens} trained tokens, ` +
          `mean reward ${result.summary.meanReward}`,
      );
    },
  );
});

/**
 * Issue 30's merge modes on one real journal: the example harness sampling at temperature 1 (seeded,
 * so the same rollouts every run: with AGENT_SEED 1 two tasks get rewards 1 and 0, a learning signal),
 * batched by the batch stage in each mode, and one policy update of the embedded default's trainer
 * (`rein policy train`, tfjs, the run's own path) on the stepwise batch. exact is what every run
 * trains on (training-iteration.test.ts); tito must give exact's batch byte for byte.
 */
describe('the merge modes on one journal', () => {
  it(
    'batches it exact, tito and stepwise, and the trainer takes an update on the stepwise batch',
    {
      timeout: 120_000,
    },
    async () => {
      const batchId = 'merge-modes';
      const seeded = { ...exampleHarness, env: { ...exampleHarness.env, AGENT_SEED: '1' } };
      const outcomes = await rollOut(batchId, seeded);
      expect(outcomes.map((o) => o.status)).toEqual(outcomes.map(() => 'succeeded'));
      const rolloutIds = outcomes.map((o) => o.rolloutId);
      const batchOf = (merge: MergeMode): Promise<BatchStageResult> =>
        runBatchStage(
          { iteration: 1, policyVersion: 'v0', configHash: `merge-${merge}`, rolloutIds },
          {
            store: stack.store,
            artifacts: new LocalArtifactStore(path.join(workDir, batchId, merge)),
            settings: sampleSettings.parse({ merge, zeroVarianceGroups: 'keep' }),
            tokenizer,
          },
        );
      const [exact, tito, stepwise] = [await batchOf('exact'), await batchOf('tito'), await batchOf('stepwise')];
      expect(tito!.batch.contentHash).toBe(exact!.batch.contentHash);

      // Every call is its own sequence; the report keeps what exact merging gave, and the mode.
      let calls = 0;
      for (const id of rolloutIds) calls += (await stack.store.listCalls(id)).length;
      expect(stepwise!.summary).toMatchObject({
        mergeMode: 'stepwise',
        mergeRate: exact!.summary.mergeRate,
        sequences: calls,
        rolloutsUsed: outcomes.length,
      });
      const report = JSON.parse(readFileSync(fileURLToPath(stepwise!.report.uri), 'utf8')) as DataQualityReport;
      expect(report.merge).toEqual({ mode: 'stepwise' });
      // Each completion is trained once in either mode: what merging masks, stepwise masks too.
      expect(stepwise!.summary.trainedTokens).toBe(exact!.summary.trainedTokens);
      // Unset, the loss aggregation under stepwise is rollout-mean: each rollout weighs the same, whatever its calls.
      const decoded = decodeBatch(readFileSync(fileURLToPath(stepwise!.batch.uri)));
      const weightOf = new Map<string, number>();
      for (const s of decoded.sequences)
        weightOf.set(s.rolloutId, (weightOf.get(s.rolloutId) ?? 0) + s.lossWeights.reduce((a, b) => a + b, 0));
      expect(weightOf.size).toBe(outcomes.length);
      for (const weight of weightOf.values()) expect(weight).toBeCloseTo(1 / outcomes.length, 5);

      const rewards = new Map<string, number[]>();
      for (const o of outcomes) rewards.set(o.taskId, [...(rewards.get(o.taskId) ?? []), o.reward ?? 0]);
      const signal = [...rewards.values()].some((r) => Math.max(...r) > Math.min(...r));
      expect(signal, 'no task got two different rewards: pick another AGENT_SEED').toBe(true);

      const trainer = localPolicyTrainer({ ...config.trainer, epochs: 1 }, path.join(workDir, 'trainer-logs'));
      const outputDir = path.join(workDir, batchId, 'v1-stepwise');
      const result = await trainer.train({
        parentCheckpoint: base,
        batchPath: fileURLToPath(stepwise!.batch.uri),
        outputDir,
      });
      expect(result).toMatchObject({ reused: false, batchContentHash: stepwise!.batch.contentHash });
      expect(result.steps).toBeGreaterThan(result.skippedMinibatches);
      const weights = (dir: string) => readFileSync(path.join(dir, 'model.safetensors'));
      expect(weights(outputDir).equals(weights(base))).toBe(false);
      console.log(
        `merge modes: ${outcomes.length} rollouts, ${calls} calls; exact ${exact!.summary.sequences} sequences ` +
          `(merge rate ${exact!.summary.mergeRate}), stepwise ${stepwise!.summary.sequences}; ` +
          `${stepwise!.summary.trainedTokens} trained tokens; rewards ${JSON.stringify([...rewards])}; ` +
          `update in ${result.seconds} s`,
      );
    },
  );
});
