import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEnvironment } from '../../src/environments/load.js';
import { ENVIRONMENT_EVENT, rolloutEnvironment, VARIANT_FIELD } from '../../src/environments/rollout-environment.js';
import { EnvironmentServer } from '../../src/environments/server.js';
import { environmentSchema, type EnvironmentSettings } from '../../src/environments/settings.js';
import { variantId } from '../../src/environments/variant-spec.js';
import { VARIANT_ORIGIN_FIELD } from '../../src/environments/variant-tasks.js';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const program = (script: string) => ({
  command: process.execPath,
  args: [path.join(example, script), '{task}', '{output}'],
  timeoutMs: 20_000,
});

let t: TestGateway;
let server: EnvironmentServer;
let workDir: string;
beforeAll(async () => {
  t = await startTestGateway();
  server = await EnvironmentServer.start();
  workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-env-rollouts-'));
});
afterAll(async () => {
  await server.close();
  await t.close();
  rmSync(workDir, { recursive: true, force: true });
});

const settings: EnvironmentSettings = environmentSchema.parse({
  module: path.join(example, 'environment.mjs'),
  variants: [
    { name: 'worded', observations: { template: 'The calculator says: {observation}' } },
    {
      name: 'strict',
      rules: {
        strictFormat: { tool: 'calc', argument: 'x', pattern: '\\d+ \\* \\d+', hint: 'two integers joined by " * "' },
      },
    },
  ],
});

describe('rollouts in an environment and its variants', () => {
  it('serves the harness’s tool calls from the variant its task names, and the original verifier scores them all', async () => {
    const gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
    const environment = await rolloutEnvironment(settings, server);
    const outcomes = await runRollouts(
      {
        batchId: 'env',
        tasks: [
          { id: 'plain', question: '6*7', answer: 42 },
          {
            id: 'worded',
            question: '6*7',
            answer: 42,
            [VARIANT_FIELD]: 'worded',
            [VARIANT_ORIGIN_FIELD]: { variant: 'v-x', task: 'plain' },
          },
          { id: 'strict', question: '6*7', answer: 42, [VARIANT_FIELD]: 'strict' },
        ],
        samplesPerTask: 1,
        mode: 'train',
        policyVersion: 'policy-v1',
        hiddenFields: ['answer'],
        rewardWeights: { success: 1 },
        concurrency: 3,
        maxAttempts: 1,
        workDir,
      },
      { gateway, harness: localExecutor(program('harness.mjs')), verifier: program('verifier.mjs'), environment },
    );
    // The strict variant refused the agent's call format, so its answer held no right number: scored, not failed.
    expect(outcomes.map((o) => [o.rolloutId, o.status, o.reward])).toEqual([
      ['env.plain.0', 'succeeded', 1],
      ['env.worded.0', 'succeeded', 1],
      ['env.strict.0', 'succeeded', 0],
    ]);

    const env = await loadEnvironment(settings.module);
    const ids = {
      plain: null,
      worded: variantId(env.id, settings.variants[0]!),
      strict: variantId(env.id, settings.variants[1]!),
    };
    for (const [task, variant] of Object.entries(ids)) {
      const events = await gateway.listEvents(`env.${task}.0`);
      const session = events.find((e) => e.type === 'custom' && e.payload.name === ENVIRONMENT_EVENT);
      expect(session?.payload.data, task).toMatchObject({
        environment: env.id,
        variant,
        steps: 1,
        errors: task === 'strict' ? 1 : 0,
      });
      // Every reward is the run's verifier's: its two components, against the task's own answer.
      const reward = events.find((e) => e.type === 'reward');
      expect(Object.keys((reward?.payload.components as object | undefined) ?? {}).sort(), task).toEqual([
        'format',
        'success',
      ]);
      // The harness never learns which variant it runs in.
      const seen = readFileSync(path.join(workDir, `env.${task}.0`, 'task.json'), 'utf8');
      expect(seen).not.toContain(VARIANT_FIELD);
      expect(seen).not.toContain(VARIANT_ORIGIN_FIELD);
    }
    // The model saw the tool's answer as the variant worded it: the harness asked the environment.
    const calls = await gateway.listCalls('env.worded.0');
    const messages = (calls.at(-1)?.requestSent as { messages: unknown } | undefined)?.messages as Array<{
      role: string;
      content: string;
    }>;
    expect(messages.find((m) => m.role === 'tool')?.content).toBe('The calculator says: 42');
    const strictCalls = await gateway.listCalls('env.strict.0');
    const refused = (
      (strictCalls.at(-1)?.requestSent as { messages: unknown } | undefined)?.messages as Array<{
        role: string;
        content: string;
      }>
    ).find((m) => m.role === 'tool');
    expect(refused?.content).toMatch(/^error: .*two integers joined by " \* "/);
  });

  it('refuses a variant whose rules name a tool the environment does not have, before anything runs', async () => {
    await expect(
      rolloutEnvironment(
        { ...settings, variants: [{ name: 'gone', rules: { removeTool: { tool: 'calc', alternative: 'abacus' } } }] },
        server,
      ),
    ).rejects.toThrow(/environment\.variants\[0\] \(gone\): .*abacus/);
  });
});
