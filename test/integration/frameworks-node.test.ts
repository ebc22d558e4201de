import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { loadConfig } from '../../src/config/load.js';
import { packageRoot } from '../../src/package-root.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import type { ProgramSpec } from '../../src/rollouts/program.js';
import type { RolloutOutcome } from '../../src/rollouts/rollout-batch.js';
import { SAMPLES_MERGE } from '../../src/rollouts/rollout.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { MERGE_MODES, type MergeMode } from '../../src/samples/merge-modes.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { mergeRollout } from '../../src/samples/merge.js';
import { toMergeCalls } from '../../src/samples/retokenize.js';
import { runBatchStage, type DataQualityReport } from '../../src/samples/stage.js';
import type { CallRecord } from '../../src/store/trace-store.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { exampleDir } from '../helpers/example-config.js';

/**
 * Issue 30's gallery, the Node half: the calculator agent written with each Node agent framework
 * the way its docs teach (examples/frameworks/node, its own pinned packages on Node 24, which
 * scripts/setup-tests.sh installs), each pointed at Rein by base URL and key only. Each runs the
 * example's tasks through the gateway to the embedded policy, and the batch stage builds a batch
 * from the journal as a run does. What a user relies on: every call journaled with ids and
 * log-probs, sequences built, the merge rate and its causes reported, every rollout scored. The
 * merge rate is recorded, not required (frameworks may resend history their own way); the numbers
 * go to test-artifacts/frameworks-node.json.
 */
const root = packageRoot();
const gallery = path.join(root, 'examples', 'frameworks', 'node');
const galleryNode = path.join(root, '.tools', 'gallery-node', 'node');
const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-frameworks-node-'));
const { config } = loadConfig({ file: path.join(exampleDir, 'rein.yaml'), env: {} });
/**
 * The merge mode the gallery's rollouts and batches use: exact in CI; REIN_GALLERY_MERGE=tito or stepwise measures
 * the others (BENCHMARKS.md's framework table).
 */
const MERGE = (process.env.REIN_GALLERY_MERGE ?? 'exact') as MergeMode;
if (!MERGE_MODES.includes(MERGE)) throw new Error(`REIN_GALLERY_MERGE must be one of ${MERGE_MODES.join(', ')}`);
const base = config.run.base.checkpoint as string;

const frameworks = [
  { name: 'ai-sdk-chat', framework: 'AI SDK v6, openai.chat()', endpoint: 'chat.completions' },
  { name: 'ai-sdk-responses', framework: 'AI SDK v6, openai() (default)', endpoint: 'responses' },
  { name: 'openai-agents', framework: 'OpenAI Agents JS, Agent + run', endpoint: 'responses' },
  { name: 'anthropic-tool-loop', framework: 'Anthropic SDK tool loop', endpoint: 'messages' },
];
// Products: the base policy reaches for its calculator on them, so rollouts run several turns.
// The agents decode greedily, so one sample a task says all a second would.
const tasks = loadTaskSet(config.run.trainTasks as string)
  .tasks.filter((task) => / times /.test(String(task.question)))
  .slice(0, 3);

/** The gallery's Node and packages, which the test setup installs; a clear error without them. */
function galleryHarness(name: string): ProgramSpec {
  if (!existsSync(galleryNode) || !existsSync(path.join(gallery, 'node_modules', '@openai', 'agents')))
    throw new Error(
      `the Node framework gallery is not installed (${galleryNode}, ${gallery}/node_modules): run scripts/setup-tests.sh`,
    );
  return {
    command: realpathSync(galleryNode),
    args: [path.join(gallery, `${name}.mjs`), '{task}', '{output}'],
    envAllow: ['PATH', 'HOME'],
    timeoutMs: 60_000,
  };
}

let stack: EmbeddedStack;
let tokenizer: ChatTokenizer;
const results: Record<string, unknown> = {};
beforeAll(async () => {
  stack = await startEmbeddedStack({ workDir, baseCheckpoint: base });
  tokenizer = ChatTokenizer.fromDirectory(base);
});
afterAll(async () => {
  await stack?.close();
  rmSync(workDir, { recursive: true, force: true });
  const artifacts = path.join(root, 'test-artifacts');
  mkdirSync(artifacts, { recursive: true });
  writeFileSync(
    path.join(artifacts, `frameworks-node${MERGE === 'exact' ? '' : `-${MERGE}`}.json`),
    `${JSON.stringify(results, null, 2)}\n`,
  );
});

/** The harness's rollouts of the tasks, run and scored as a run's rollout set runs them. */
async function rollOut(batchId: string, harness: ProgramSpec): Promise<RolloutOutcome[]> {
  return runRollouts(
    {
      batchId,
      tasks,
      samplesPerTask: 1,
      mode: 'train',
      policyVersion: 'v0',
      hiddenFields: config.rollouts.hiddenFields,
      rewardWeights: config.rollouts.rewardWeights,
      concurrency: 3,
      maxAttempts: 1,
      workDir: path.join(workDir, batchId),
      metadata: { [SAMPLES_MERGE]: MERGE },
    },
    { gateway: stack.control, harness: localExecutor(harness), verifier: programSpec(config.verifier!) },
  );
}

/** Every call journaled as `endpoint`'s with prompt ids, completion ids and a log-prob per completion token. */
function expectCapturedWithIds(calls: readonly CallRecord[], endpoint: string): number {
  let completionTokens = 0;
  for (const call of calls) {
    expect(call).toMatchObject({ endpoint, status: 'ok', policyVersion: 'v0' });
    expect(call.promptIds?.length).toBeGreaterThan(0);
    const [choice] = call.choices ?? [];
    expect(choice?.completionIds?.length).toBeGreaterThan(0);
    expect(choice?.logprobs).toHaveLength(choice?.completionIds?.length ?? -1);
    completionTokens += choice?.completionIds?.length ?? 0;
  }
  return completionTokens;
}

describe.each(frameworks)('the $framework agent', ({ name, framework, endpoint }) => {
  it('is captured, built into sequences and scored', { timeout: 120_000 }, async () => {
    const started = performance.now();
    const outcomes = await rollOut(`gallery-${name}`, galleryHarness(name));
    const seconds = (performance.now() - started) / 1000;
    // Every rollout ran and has a verified reward (the verifier's, not the harness's).
    expect(outcomes.map((o) => [o.status, o.reason])).toEqual(outcomes.map(() => ['succeeded', null]));
    for (const outcome of outcomes) expect(outcome.reward).toEqual(expect.any(Number));

    let calls = 0;
    let multiTurn = 0;
    let completionTokens = 0;
    for (const { rolloutId } of outcomes) {
      const journaled = await stack.store.listCalls(rolloutId);
      expect(journaled.length).toBeGreaterThan(0);
      calls += journaled.length;
      if (journaled.length > 1) multiTurn++;
      completionTokens += expectCapturedWithIds(journaled, endpoint);
      // Each rollout trains: at least one sequence from its calls.
      const merged = mergeRollout(rolloutId, toMergeCalls(journaled, tokenizer).calls, tokenizer);
      expect(merged.sequences.length).toBeGreaterThan(0);
    }

    // The framework ran its tool loop: the model called the calculator and read the result back.
    expect(multiTurn).toBeGreaterThan(0);

    const result = await runBatchStage(
      {
        iteration: 1,
        policyVersion: 'v0',
        configHash: 'frameworks-node',
        rolloutIds: outcomes.map((o) => o.rolloutId),
      },
      {
        store: stack.store,
        artifacts: new LocalArtifactStore(path.join(workDir, name, 'artifacts')),
        settings: { ...config.samples, merge: MERGE, zeroVarianceGroups: 'keep' },
        tokenizer,
      },
    );
    expect(result.summary).toMatchObject({ rolloutsUsed: outcomes.length, rolloutsExcluded: 0 });
    expect(result.summary.sequences).toBeGreaterThanOrEqual(outcomes.length);
    const report = JSON.parse(readFileSync(fileURLToPath(result.report.uri), 'utf8')) as DataQualityReport;
    expect(report.calls).toMatchObject({ total: calls, skippedWithoutTokenIds: 0, missingLogprobs: 0 });
    // Every break of a rollout into more sequences has its cause in the report.
    const breaks = Object.values(report.mismatchCauses).reduce((a, b) => a + b, 0);
    // Under stepwise every call is a sequence; the causes still say where exact merging would break.
    if (MERGE === 'stepwise') expect(result.summary.sequences).toBe(report.calls.total);
    else expect(breaks).toBe(result.summary.sequences - outcomes.length);
    expect(report.rewards?.count).toBe(outcomes.length);

    results[name] = {
      framework,
      api: endpoint,
      rollouts: outcomes.length,
      calls,
      multiTurnRollouts: multiTurn,
      sequences: result.summary.sequences,
      mergeRate: report.mergeRate,
      mismatchCauses: report.mismatchCauses,
      completionTokens,
      trainedTokens: report.tokens.trained,
      trainedShare: completionTokens === 0 ? 0 : report.tokens.trained / completionTokens,
      meanReward: result.summary.meanReward,
      secondsPerRollout: seconds / outcomes.length,
    };
    console.log(`${name}: ${JSON.stringify(results[name])}`);
  });
});
