import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { loadConfig } from '../../src/config/load.js';
import { programSpec } from '../../src/rollouts/harness-spec.js';
import { loadTaskSet } from '../../src/rollouts/tasks.js';
import { startEmbeddedStack, type EmbeddedStack } from '../../src/training/embedded-stack.js';
import { exampleDir } from '../helpers/example-config.js';

const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-embedded-rollouts-'));
// The example agent as its own config file describes it.
const { config } = loadConfig({ file: path.join(exampleDir, 'rein.yaml'), env: {} });
const example = {
  trainTasks: loadTaskSet(config.run.trainTasks as string).tasks,
  hiddenFields: config.rollouts.hiddenFields,
  rewardWeights: config.rollouts.rewardWeights,
  harness: programSpec(config.harness?.local as NonNullable<NonNullable<typeof config.harness>['local']>),
  verifier: programSpec(config.verifier as NonNullable<typeof config.verifier>),
};
let stack: EmbeddedStack;
beforeAll(async () => {
  stack = await startEmbeddedStack({ workDir, baseCheckpoint: config.run.base.checkpoint as string });
});
afterAll(async () => {
  await stack.close();
  rmSync(workDir, { recursive: true, force: true });
});

describe('rollouts of the example agent on the embedded policy', () => {
  it(
    'runs 64 rollouts with at most 8 at a time, and lands every reward in the journal',
    { timeout: 300_000 },
    async () => {
      const outcomes = await runRollouts(
        {
          batchId: 'sixty-four',
          tasks: example.trainTasks.slice(0, 16),
          samplesPerTask: 4,
          mode: 'train',
          policyVersion: 'v0',
          hiddenFields: example.hiddenFields,
          rewardWeights: example.rewardWeights,
          concurrency: 8,
          maxAttempts: 2,
          workDir: path.join(workDir, 'rollouts'),
        },
        { gateway: stack.control, harness: localExecutor(example.harness), verifier: example.verifier },
      );
      expect(outcomes).toHaveLength(64);
      expect(outcomes.every((o) => o.reward === 0 || o.reward === 1)).toBe(true);
      // A run that overflows the model's context crashes the harness (the server's 400): the policy's own failure,
      // scored 0.
      for (const o of outcomes.filter((x) => x.status !== 'succeeded')) {
        expect(o).toMatchObject({
          status: 'failed',
          failureClass: 'harness',
          reward: 0,
          reason: expect.stringContaining('maximum context length'),
        });
      }
      // The base policy solves some tasks and not others: rewards that carry signal.
      const solved = outcomes.filter((o) => o.reward === 1).length;
      expect(solved).toBeGreaterThan(0);
      expect(solved).toBeLessThan(64);

      const spans: Array<[number, number]> = [];
      for (const outcome of outcomes) {
        const events = await stack.store.listEvents(outcome.rolloutId);
        const at = (to: string) => Date.parse(events.find((e) => e.type === 'status' && e.payload.to === to)?.at ?? '');
        spans.push([at('running'), at(outcome.status)]);
        expect(events.filter((e) => e.type === 'reward' && e.source === 'admin').map((e) => e.payload.value)).toEqual([
          outcome.reward,
        ]);
        const calls = await stack.store.listCalls(outcome.rolloutId);
        expect(calls.length).toBeGreaterThan(0);
        expect(calls.every((c) => c.policyVersion === 'v0')).toBe(true);
        // Every answered call has its token ids journaled (a reply may be empty: the model may stop at once).
        expect(calls.filter((c) => c.status === 'ok').every((c) => Array.isArray(c.choices?.[0]?.completionIds))).toBe(
          true,
        );
        if (outcome.status === 'succeeded') {
          expect(calls.at(-1)?.status).toBe('ok');
          const odd = calls.filter((c) => c.status !== 'ok' || c.choices?.[0]?.completionIds?.length === 0);
          if (odd.length > 0)
            console.log(
              'calls of a succeeded rollout that failed or were empty:',
              JSON.stringify(
                odd.map((c) => ({
                  id: c.id,
                  status: c.status,
                  error: c.errorClass,
                  message: c.errorMessage,
                  choices: c.choices,
                })),
              ),
            );
        }
      }
      // Never more than 8 running at once (a rollout runs from its start to its verdict).
      const points = spans
        .flatMap(([start, end]) => [[start, 1] as const, [end, -1] as const])
        .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
      let running = 0;
      let peak = 0;
      for (const [, delta] of points) peak = Math.max(peak, (running += delta));
      expect(peak).toBeLessThanOrEqual(8);
      expect(peak).toBeGreaterThan(1);
    },
  );
});
