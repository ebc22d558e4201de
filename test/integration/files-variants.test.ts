import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTaskIds } from '../../src/environments/curriculum.js';
import { ENVIRONMENT_EVENT, rolloutEnvironment } from '../../src/environments/rollout-environment.js';
import { EnvironmentServer } from '../../src/environments/server.js';
import { environmentSchema } from '../../src/environments/settings.js';
import { packageRoot } from '../../src/package-root.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';

/**
 * The files example as embedded.yaml runs it: its grounded harness on the embedded policy, in the
 * original environment and in two variants (another state made by vary(), other rules), each
 * scored by the example's own verifier. The loop around it (validation, curriculum, training)
 * is the same as the calculator's (environment-iteration.test.ts); this checks the example.
 */
const example = path.join(packageRoot(), 'examples', 'files-agent');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-files-variants-'));
let stack: EmbeddedStack;
let server: EnvironmentServer;

beforeAll(async () => {
  stack = await startEmbeddedStack({ workDir: dir, baseCheckpoint: path.join(packageRoot(), 'models', 'base') });
  server = await EnvironmentServer.start();
});
afterAll(async () => {
  await server.close();
  await stack.close();
  rmSync(dir, { recursive: true, force: true });
});

const program = (script: string) => ({
  command: process.execPath,
  args: [path.join(example, script), '{task}', '{output}'],
  timeoutMs: 60_000,
});

describe('the files example in its variants (embedded policy, grounded harness)', () => {
  it('runs the agent in each variant it is given, and the example verifier scores every rollout', async () => {
    const settings = environmentSchema.parse({
      module: path.join(example, 'environment.mjs'),
      variants: [
        { name: 'three-services', state: { services: 3 } },
        { name: 'flaky-reads', rules: { transientErrors: { every: 3, tools: ['read_file'] } } },
      ],
    });
    const environment = await rolloutEnvironment(settings, server);
    const ids = ['starter-train-0', 'starter-train-0:three-services', 'starter-train-0:flaky-reads'];
    const { tasks } = resolveTaskIds(loadTaskSet(path.join(example, 'starter-train.jsonl')).tasks, ids, environment);
    // vary() built another world with its own answer; the verifier checks that one.
    expect(tasks[1]?.answer).toBeDefined();
    expect(tasks[1]?.files).not.toEqual(tasks[0]?.files);
    const outcomes = await runRollouts(
      {
        batchId: 'files',
        tasks,
        samplesPerTask: 1,
        mode: 'train',
        policyVersion: 'v0',
        hiddenFields: ['answer'],
        rewardWeights: { success: 1 },
        concurrency: 3,
        maxAttempts: 1,
        workDir: dir,
        harnessEnv: { AGENT_GROUNDED: '1', AGENT_MAX_TURNS: '3' },
      },
      {
        gateway: stack.control,
        harness: localExecutor(program('harness.mjs')),
        verifier: program('verifier.mjs'),
        environment,
      },
    );
    expect(outcomes.map((o) => o.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    for (const [i, outcome] of outcomes.entries()) {
      const events = await stack.control.listEvents(outcome.rolloutId);
      const session = events.find((e) => e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT)?.payload.data as {
        variant: string | null;
        steps: number;
      };
      expect(session.variant).toBe(i === 0 ? null : (environment.variants[i - 1]?.id ?? 'missing'));
      expect(session.steps).toBeGreaterThan(0);
      const reward = events.find((e) => e.type === 'reward' && e.source === 'admin');
      expect(Object.keys((reward?.payload.components as object | undefined) ?? {}).sort()).toEqual([
        'format',
        'success',
      ]);
      expect([0, 1]).toContain(reward?.payload.value);
    }
  });
});
