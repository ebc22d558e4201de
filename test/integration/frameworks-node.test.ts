import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { packageRoot } from '../../src/package-root.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import type { ProgramSpec } from '../../src/rollouts/program.js';
import type { RolloutOutcome } from '../../src/rollouts/rollout-batch.js';
import { SAMPLES_MERGE } from '../../src/rollouts/rollout.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { exampleDir } from '../helpers/example-config.js';
import { checkGalleryRollouts, galleryMergeMode, writeGalleryResults } from '../helpers/gallery.js';

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
/** exact in CI; REIN_GALLERY_MERGE=tito or stepwise measures the others (BENCHMARKS.md's framework table). */
const MERGE = galleryMergeMode();
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
  writeGalleryResults('frameworks-node', MERGE, results);
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

describe.each(frameworks)('the $framework agent', ({ name, framework, endpoint }) => {
  it('is captured, built into sequences and scored', { timeout: 120_000 }, async () => {
    const started = performance.now();
    const outcomes = await rollOut(`gallery-${name}`, galleryHarness(name));
    const seconds = (performance.now() - started) / 1000;
    const check = { store: stack.store, tokenizer, config, merge: MERGE, workDir, suite: 'frameworks-node' };
    results[name] = await checkGalleryRollouts(
      { ...check, name, framework, endpoint },
      outcomes,
      seconds / outcomes.length,
    );
    console.log(`${name}: ${JSON.stringify(results[name])}`);
  });
});
