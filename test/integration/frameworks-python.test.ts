import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import { loadConfig } from '../../src/config/load.js';
import { packageRoot } from '../../src/package-root.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import type { HarnessExecutor } from '../../src/rollouts/executor.js';
import type { ProgramSpec } from '../../src/rollouts/program.js';
import type { RolloutOutcome } from '../../src/rollouts/rollout-batch.js';
import { SAMPLES_MERGE } from '../../src/rollouts/rollout.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { MERGE_MODES, type MergeMode } from '../../src/samples/merge-modes.js';
import { loadTaskSet, type Task } from '../../src/rollouts/tasks.js';
import { mergeRollout } from '../../src/samples/merge.js';
import { toMergeCalls } from '../../src/samples/retokenize.js';
import { runBatchStage, type DataQualityReport } from '../../src/samples/stage.js';
import type { CallRecord } from '../../src/store/trace-store.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { exampleDir } from '../helpers/example-config.js';

/**
 * Issue 30's gallery, the Python half: the calculator agent written with each Python agent
 * framework the way its docs teach (examples/frameworks/python, pinned in its requirements.lock,
 * which scripts/setup-tests.sh installs as .tools/frameworks), each pointed at Rein by base URL and
 * key only. Each runs the example's tasks through the gateway to the embedded policy, and the batch
 * stage builds a batch from the journal as a run does. What a user relies on: every call journaled
 * with ids and log-probs, sequences built, the merge rate and its causes reported, every rollout
 * scored. The merge rate is recorded, not required (frameworks that rewrite history split: issue
 * 30); the numbers go to test-artifacts/frameworks-python.json.
 *
 * A Python framework's imports take seconds of CPU per rollout (mini-swe-agent's, through litellm,
 * the most), so each runs two tasks and mini-swe-agent one; none is skipped. The agents decode
 * greedily, so a second sample of a task would say nothing new. All frameworks' rollouts start
 * together, three harnesses running at a time, so that imports on one core overlap model calls on
 * the other; each test then checks its own.
 */
const root = packageRoot();
const gallery = path.join(root, 'examples', 'frameworks', 'python');
const python = path.join(root, '.tools', 'frameworks', 'bin', 'python');
const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-frameworks-python-'));
const { config } = loadConfig({ file: path.join(exampleDir, 'rein.yaml'), env: {} });
/**
 * The merge mode the gallery's rollouts and batches use: exact in CI; REIN_GALLERY_MERGE=tito or stepwise measures
 * the others (BENCHMARKS.md's framework table).
 */
const MERGE = (process.env.REIN_GALLERY_MERGE ?? 'exact') as MergeMode;
if (!MERGE_MODES.includes(MERGE)) throw new Error(`REIN_GALLERY_MERGE must be one of ${MERGE_MODES.join(', ')}`);
const base = config.run.base.checkpoint as string;

const frameworks = [
  { file: 'openai_agents_chat', framework: 'openai-agents, OpenAIChatCompletionsModel', endpoint: 'chat.completions' },
  { file: 'openai_agents_responses', framework: 'openai-agents, default (Responses)', endpoint: 'responses' },
  { file: 'langgraph_chat', framework: 'LangGraph create_react_agent, ChatOpenAI', endpoint: 'chat.completions' },
  {
    file: 'langgraph_responses',
    framework: 'LangGraph create_react_agent, ChatOpenAI(use_responses_api)',
    endpoint: 'responses',
  },
  { file: 'smolagents_agent', framework: 'smolagents ToolCallingAgent, OpenAIModel', endpoint: 'chat.completions' },
  { file: 'mini_swe_agent', framework: 'mini-swe-agent DefaultAgent, LitellmModel', endpoint: 'chat.completions' },
];
// Products: the base policy reaches for its calculator on them, so rollouts run several turns.
const products = loadTaskSet(config.run.trainTasks as string).tasks.filter((task) =>
  / times /.test(String(task.question)),
);
const tasksOf = (file: string): Task[] => products.slice(0, file === 'mini_swe_agent' ? 1 : 2);

/** The gallery's pinned Python, which the test setup installs; a clear error without it. */
function galleryHarness(file: string): ProgramSpec {
  if (!existsSync(python))
    throw new Error(`the Python framework gallery is not installed (${python}): run scripts/setup-tests.sh`);
  return {
    command: python,
    args: [path.join(gallery, `${file}.py`), '{task}', '{output}'],
    envAllow: ['PATH', 'HOME'],
    timeoutMs: 90_000,
  };
}

/** A framework's rollouts, and how long its harness ran for each (seconds, while sharing the machine). */
interface GalleryRun {
  outcomes: RolloutOutcome[];
  harnessSeconds: number[];
}

/** At most `slots` harness processes at a time, across every executor it wraps. */
function sharedSlots(slots: number): (executor: HarnessExecutor) => HarnessExecutor {
  const waiting: Array<() => void> = [];
  let free = slots;
  const release = () => (waiting.length > 0 ? waiting.shift()?.() : free++);
  return (executor) => ({
    problems: () => executor.problems(),
    async run(launch) {
      if (free > 0) free--;
      else await new Promise<void>((resolve) => waiting.push(resolve));
      try {
        return await executor.run(launch);
      } finally {
        release();
      }
    },
  });
}

let stack: EmbeddedStack;
let tokenizer: ChatTokenizer;
const runs = new Map<string, Promise<GalleryRun>>();
const results: Record<string, unknown> = {};
beforeAll(async () => {
  stack = await startEmbeddedStack({ workDir, baseCheckpoint: base });
  tokenizer = ChatTokenizer.fromDirectory(base);
  const slot = sharedSlots(3);
  for (const { file } of frameworks) {
    const run = rollOut(`gallery-${file}`, tasksOf(file), slot(localExecutor(galleryHarness(file))));
    run.catch(() => {}); // its test reports the failure
    runs.set(file, run);
  }
});
afterAll(async () => {
  await stack?.close();
  rmSync(workDir, { recursive: true, force: true });
  const artifacts = path.join(root, 'test-artifacts');
  mkdirSync(artifacts, { recursive: true });
  writeFileSync(
    path.join(artifacts, `frameworks-python${MERGE === 'exact' ? '' : `-${MERGE}`}.json`),
    `${JSON.stringify(results, null, 2)}\n`,
  );
});

/** The harness's rollouts of the tasks, run and scored as a run's rollout set runs them. */
async function rollOut(batchId: string, tasks: Task[], harness: HarnessExecutor): Promise<GalleryRun> {
  const harnessSeconds: number[] = [];
  const timed: HarnessExecutor = {
    problems: () => harness.problems(),
    run: async (launch) => {
      const run = await harness.run(launch);
      harnessSeconds.push(run.seconds);
      return run;
    },
  };
  const outcomes = await runRollouts(
    {
      batchId,
      tasks,
      samplesPerTask: 1,
      mode: 'train',
      policyVersion: 'v0',
      hiddenFields: config.rollouts.hiddenFields,
      rewardWeights: config.rollouts.rewardWeights,
      concurrency: 2,
      maxAttempts: 1,
      workDir: path.join(workDir, batchId),
      metadata: { [SAMPLES_MERGE]: MERGE },
    },
    { gateway: stack.control, harness: timed, verifier: programSpec(config.verifier!) },
  );
  return { outcomes, harnessSeconds };
}

/** Every call journaled as `endpoint`'s with prompt ids, completion ids and a log-prob per completion token. */
function expectCapturedWithIds(calls: readonly CallRecord[], endpoint: string): number {
  let completionTokens = 0;
  for (const call of calls) {
    expect(call, `call ${call.seq}: ${call.errorClass ?? ''} ${call.errorMessage ?? ''}`).toMatchObject({
      endpoint,
      status: 'ok',
      policyVersion: 'v0',
    });
    expect(call.promptIds?.length).toBeGreaterThan(0);
    const [choice] = call.choices ?? [];
    expect(choice?.completionIds?.length).toBeGreaterThan(0);
    expect(choice?.logprobs).toHaveLength(choice?.completionIds?.length ?? -1);
    completionTokens += choice?.completionIds?.length ?? 0;
  }
  return completionTokens;
}

describe.each(frameworks)('the $framework agent', ({ file, framework, endpoint }) => {
  it('is captured, built into sequences and scored', { timeout: 300_000 }, async () => {
    const { outcomes, harnessSeconds } = await (runs.get(file) as Promise<GalleryRun>);
    // Every rollout ran and has a verified reward (the verifier's, not the harness's).
    expect(outcomes.map((o) => [o.status, o.reason])).toEqual(outcomes.map(() => ['succeeded', null]));
    for (const outcome of outcomes) expect(outcome.reward).toEqual(expect.any(Number));

    let calls = 0;
    let multiTurn = 0;
    let completionTokens = 0;
    const requestFields = new Set<string>();
    for (const { rolloutId } of outcomes) {
      const journaled = await stack.store.listCalls(rolloutId);
      for (const call of journaled)
        for (const key of Object.keys(call.requestReceived as object)) requestFields.add(key);
      expect(journaled.length).toBeGreaterThan(0);
      calls += journaled.length;
      if (journaled.length > 1) multiTurn++;
      completionTokens += expectCapturedWithIds(journaled, endpoint);
      // Each rollout trains: at least one sequence from its calls.
      const merged = mergeRollout(rolloutId, toMergeCalls(journaled, tokenizer).calls, tokenizer);
      expect(merged.sequences.length).toBeGreaterThan(0);
    }

    // The framework ran its tool loop: the model called its tool and the framework sent the result back.
    expect(multiTurn).toBeGreaterThan(0);

    const result = await runBatchStage(
      {
        iteration: 1,
        policyVersion: 'v0',
        configHash: 'frameworks-python',
        rolloutIds: outcomes.map((o) => o.rolloutId),
      },
      {
        store: stack.store,
        artifacts: new LocalArtifactStore(path.join(workDir, file, 'artifacts')),
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

    results[file] = {
      framework,
      api: endpoint,
      rollouts: outcomes.length,
      calls,
      multiTurnRollouts: multiTurn,
      requestFields: [...requestFields].sort(),
      sequences: result.summary.sequences,
      mergeRate: report.mergeRate,
      mismatchCauses: report.mismatchCauses,
      completionTokens,
      trainedTokens: report.tokens.trained,
      trainedShare: completionTokens === 0 ? 0 : report.tokens.trained / completionTokens,
      // Replies cut at max_tokens make their rollout truncated: samples.truncated decides (masked here).
      truncatedRollouts: report.truncatedRollouts,
      meanReward: result.summary.meanReward,
      // The harness process's run, three at a time on the machine: imports, calls and tool.
      secondsPerRollout: harnessSeconds.reduce((a, b) => a + b, 0) / harnessSeconds.length,
    };
    console.log(`${file}: ${JSON.stringify(results[file])}`);
  });
});
