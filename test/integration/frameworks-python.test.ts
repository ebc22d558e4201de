import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { packageRoot } from '../../src/package-root.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import type { HarnessExecutor } from '../../src/rollouts/executor.js';
import type { ProgramSpec } from '../../src/rollouts/program.js';
import type { RolloutOutcome } from '../../src/rollouts/rollout-batch.js';
import { SAMPLES_MERGE } from '../../src/rollouts/rollout.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { loadTaskSet, type Task } from '../../src/rollouts/tasks.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { exampleDir } from '../helpers/example-config.js';
import { checkGalleryRollouts, galleryMergeMode, writeGalleryResults } from '../helpers/gallery.js';

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
/** exact in CI; REIN_GALLERY_MERGE=tito or stepwise measures the others (BENCHMARKS.md's framework table). */
const MERGE = galleryMergeMode();
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
  writeGalleryResults('frameworks-python', MERGE, results);
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

describe.each(frameworks)('the $framework agent', ({ file, framework, endpoint }) => {
  it('is captured, built into sequences and scored', { timeout: 300_000 }, async () => {
    const { outcomes, harnessSeconds } = await (runs.get(file) as Promise<GalleryRun>);
    const check = { store: stack.store, tokenizer, config, merge: MERGE, workDir, suite: 'frameworks-python' };
    // The harness process's run, three at a time on the machine: imports, calls and tool.
    const seconds = harnessSeconds.reduce((a, b) => a + b, 0) / harnessSeconds.length;
    results[file] = await checkGalleryRollouts({ ...check, name: file, framework, endpoint }, outcomes, seconds);
    console.log(`${file}: ${JSON.stringify(results[file])}`);
  });
});
