import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startServices, type RunningServices } from '../../src/cli/services.js';
import { shadowRunInput } from '../../src/client/shadow.js';
import { embeddedBaseCheckpoint } from '../../src/config/embedded-default.js';
import { loadConfig } from '../../src/config/load.js';
import type { ReinConfig } from '../../src/config/schema.js';
import { gatewayControlFromConfig } from '../../src/gateway/from-config.js';
import { createLogger } from '../../src/log/logger.js';
import { withRegistry } from '../../src/registry/open.js';
import { rolloutIdFor } from '../../src/rollouts/rollout-id.js';
import { decodeSafetensors, encodeSafetensors } from '../../src/samples/safetensors.js';
import { actionOf, compareActions, formatShadowReport, type ShadowReport } from '../../src/shadow/report.js';
import { storeLocation } from '../../src/store/location.js';
import { traceStoreFromConfig } from '../../src/store/open.js';
import type { TraceStore } from '../../src/store/trace-store.js';
import type { CallRecord, ShadowCallRecord } from '../../src/store/trace-store.js';
import type { shadowRun, ShadowRunResult } from '../../workflows/index.js';
import { runRein } from '../helpers/cli.js';
import { reinInProcessWith } from '../helpers/cli-in-process.js';
import { writeExampleConfig } from '../helpers/example-config.js';

/**
 * Offline shadow runs end to end on the embedded default: the example agent on held-out tasks,
 * production (the base policy v0) acting, every call mirrored to a candidate. A long-lived
 * gateway and worker (as `rein dev` runs them) let the test see the mirror after each run; the
 * CLI finds the worker polling and uses it.
 */
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-shadow-run-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined };
const CANDIDATE = 'shadow-cand';
const TASKS = 16;
let services: RunningServices;
let config: ReinConfig;
let file: string;
let traces: TraceStore;

/** The base policy with every weight nudged (seeded): it answers like the base on some calls and not on others. */
function writePerturbedBase(target: string, scale: number): void {
  const base = embeddedBaseCheckpoint();
  mkdirSync(target, { recursive: true });
  for (const name of ['config.json', 'tokenizer.json', 'tokenizer_config.json'])
    copyFileSync(path.join(base, name), path.join(target, name));
  const { tensors, metadata } = decodeSafetensors(readFileSync(path.join(base, 'model.safetensors')));
  let seed = 7;
  const uniform = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) + 0.5) / 2 ** 31;
  for (const tensor of Object.values(tensors)) {
    if (!(tensor.data instanceof Float32Array)) continue;
    for (let i = 0; i < tensor.data.length; i++)
      tensor.data[i] = (tensor.data[i] as number) * (1 + scale * (2 * uniform() - 1));
  }
  writeFileSync(path.join(target, 'model.safetensors'), encodeSafetensors(tensors, metadata));
}

beforeAll(async () => {
  const written = await writeExampleConfig(path.join(dir, 'example'), { heldoutLimit: TASKS });
  file = written.file;
  const candidateDir = path.join(dir, 'candidate');
  writePerturbedBase(candidateDir, 0.5);
  // Registered with its checkpoint folder, the services serve it beside the base when they start.
  config = loadConfig({ file }).config;
  await withRegistry(storeLocation(config), (registry) =>
    registry.register({
      version: CANDIDATE,
      parent: 'v0',
      runId: null,
      iteration: null,
      checkpointUri: candidateDir,
      batchContentHash: null,
      trainerMetrics: {},
    }),
  );
  services = await startServices(config, createLogger('warn'));
  traces = await traceStoreFromConfig(config);
}, 60_000);

afterAll(async () => {
  await traces?.close();
  await services?.shutdown();
  rmSync(dir, { recursive: true, force: true });
});

const rein = (...args: string[]) => runRein(['--config', file, ...args], { env });
// Each test's first command is a real `rein` process, as a user runs it; the commands after it run through the CLI's
// own entry point in this process, one at a time (a child process's start-up is seconds on a busy machine).
const here = (...args: string[]) => reinInProcessWith(env, '--config', file, ...args);

/** The set's rollouts with their production calls (in order) and shadow calls. */
async function rolloutsOf(batchId: string, taskIds: string[]) {
  return Promise.all(
    taskIds
      .map((task) => rolloutIdFor(batchId, task, 0))
      .map(async (id) => ({
        id,
        rollout: await traces.getRollout(id),
        calls: await traces.listCalls(id),
        shadows: await traces.listShadowCalls({ rolloutId: id }),
        output: JSON.parse(
          readFileSync(path.join(config.dataDir, 'rollouts', id, 'attempt-1', 'output.json'), 'utf8'),
        ) as { answer: string | null },
      })),
  );
}

/** The assistant message the harness sent back in its next request: what it was given for `call`. */
function givenToHarness(call: CallRecord, next: CallRecord) {
  const sent = (call.requestReceived as { messages: unknown[] }).messages.length;
  const message = (next.requestReceived as { messages: unknown[] }).messages[sent];
  return actionOf('chat.completions', { choices: [{ index: 0, message }] });
}

describe('rein shadow run (offline shadow run on the embedded default)', () => {
  it('runs the held-out tasks with production acting, mirrors every call to the candidate, never lets its answers reach the harness, and clears the mirror', async () => {
    const run = await rein('shadow', 'run', CANDIDATE, '--heldout', String(TASKS), '--json');
    expect(run.code, `${run.stdout}\n${run.stderr.slice(-3000)}`).toBe(0);
    const { result, report } = JSON.parse(run.stdout) as { result: ShadowRunResult; report: ShadowReport };
    console.log(formatShadowReport(report)); // the evidence, in the test log
    expect(result).toMatchObject({
      candidate: CANDIDATE,
      alias: 'production',
      incumbent: 'v0',
      rollouts: { total: TASKS },
    });
    const input = shadowRunInput(config, CANDIDATE, { heldoutLimit: TASKS });
    expect(result.rollouts.batchId).toBe(input.batchId);
    expect(input.batchId).toMatch(new RegExp(`^shadow\\.${CANDIDATE}\\.[0-9a-f]{12}\\.h-[0-9a-f]{8}\\.${TASKS}$`));

    // The mirror is gone the moment the run is over.
    expect(services.gateway.router.mirrors()).toEqual([]);
    expect(await gatewayControlFromConfig(config.gateway)?.listMirrors()).toEqual([]);

    // The report artifact is the one the workflow points at, and covers exactly the run's rollouts.
    const artifact = JSON.parse(readFileSync(fileURLToPath(result.report.uri), 'utf8')) as ShadowReport;
    expect(artifact).toEqual(report);
    const rollouts = await rolloutsOf(input.batchId, input.heldout.taskIds);
    const calls = rollouts.flatMap((r) => r.calls);
    expect(calls.length).toBeGreaterThanOrEqual(TASKS);
    expect(report).toMatchObject({
      candidate: CANDIDATE,
      incumbents: ['v0'],
      rollouts: TASKS,
      mirrored: calls.length,
      executionFailures: { total: 0 },
      compared: calls.length,
    });
    expect(result.report).toMatchObject({
      mirrored: calls.length,
      compared: calls.length,
      disagreed: calls.length - report.actions.same,
    });
    // A candidate that differs: it disagrees on some calls, agrees on others.
    expect(report.actions.same).toBeGreaterThan(0);
    expect(report.actions.same).toBeLessThan(calls.length);

    let disagreements = 0;
    for (const { id, rollout, calls: primaries, shadows, output } of rollouts) {
      // Unpinned production traffic: each call went to the version production serves.
      expect(rollout).toMatchObject({
        mode: 'shadow',
        policyVersion: null,
        status: expect.stringMatching(/^(succeeded|failed)$/),
      });
      expect(primaries.map((c) => [c.policyVersion, c.status])).toEqual(primaries.map(() => ['v0', 'ok']));
      // One shadow call per production call, each the candidate's.
      expect(shadows.map((s) => s.primaryCallId).sort()).toEqual(primaries.map((c) => c.id).sort());
      expect(
        shadows.every((s) => s.candidateVersion === CANDIDATE && s.incumbentVersion === 'v0' && s.status === 'ok'),
      ).toBe(true);
      const shadowOf = new Map<string, ShadowCallRecord>(shadows.map((s) => [s.primaryCallId, s]));
      primaries.forEach((call, i) => {
        const production = actionOf(call.endpoint, call.response);
        const candidate = actionOf('chat.completions', shadowOf.get(call.id)?.response);
        if (!production || !candidate) throw new Error(`call ${call.id} of ${id} has no action to compare`);
        const differs = compareActions(production, candidate) !== 'same';
        if (differs) disagreements++;
        const next = primaries[i + 1];
        if (next) {
          // What the harness carried on with is production's answer, never the candidate's.
          const given = givenToHarness(call, next);
          expect(given && compareActions(production, given)).toBe('same');
          if (differs) expect(given && compareActions(candidate, given)).not.toBe('same');
        } else if (production.kind === 'answer') {
          expect(output.answer).toBe(production.text);
          if (differs && candidate.kind === 'answer') expect(output.answer).not.toBe(candidate.text);
        }
      });
    }
    expect(disagreements).toBe(calls.length - report.actions.same);

    // `rein shadow report` reads the same shadow calls back from the trace store.
    const all = await here('shadow', 'report', CANDIDATE);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout).toContain(`${calls.length} mirrored calls over ${TASKS} rollouts`);
  }, 120_000);

  it('shows full agreement when production is its own candidate, and mirrors nothing to an earlier candidate', async () => {
    // A policy against itself agrees on every call however many there are: a few tasks show it.
    const tasks = 4;
    const before = (await traces.listShadowCalls({ candidate: CANDIDATE })).length;
    const run = await rein('shadow', 'run', 'v0', '--heldout', String(tasks));
    expect(run.code, `${run.stdout}\n${run.stderr.slice(-3000)}`).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`(\\d+) mirrored calls over ${tasks} rollouts`));
    const mirrored = Number(/(\d+) mirrored calls/.exec(run.stdout)?.[1]);
    // Greedy decoding of one policy twice: the noise floor is zero.
    expect(run.stdout).toMatch(new RegExp(`same action\\s+${mirrored}\\s+100\\.0%`));
    expect(run.stdout).toContain('acted by v0; the mirror on production is cleared.');
    expect((await traces.listShadowCalls({ candidate: CANDIDATE })).length).toBe(before);
    expect(services.gateway.router.mirrors()).toEqual([]);
  }, 120_000);

  it('mirrors live traffic with start/stop, and a shadow run refuses to take over a mirror in place', async () => {
    const start = await rein('shadow', 'start', CANDIDATE);
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout).toContain(`Mirroring production (served by v0) to ${CANDIDATE}`);
    expect(services.gateway.router.mirrors()).toEqual([
      { alias: 'production', incumbent: 'v0', candidate: CANDIDATE, sampleRate: 1 },
    ]);

    const refused = await here('shadow', 'run', 'v0', '--heldout', '1');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `alias production is mirrored to ${CANDIDATE} already; stop that mirror first (\`rein shadow stop --alias production\`)`,
    );
    expect(services.gateway.router.mirrors()).toHaveLength(1);

    const stop = await here('shadow', 'stop');
    expect(stop.stdout).toContain(`Stopped mirroring production to ${CANDIDATE}`);
    expect(services.gateway.router.mirrors()).toEqual([]);
    const again = await here('shadow', 'stop');
    const unknown = await here('shadow', 'run', 'no-such-policy', '--heldout', '1');
    expect(again.stdout).toContain('production is not mirrored; nothing to stop.');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('the gateway does not serve no-such-policy');
    expect(unknown.stderr).toContain('rein register no-such-policy --checkpoint DIR');
    expect(services.gateway.router.mirrors()).toEqual([]);
  }, 120_000);

  it('clears the mirror when the run is cancelled mid-way', async () => {
    const input = shadowRunInput(config, CANDIDATE, { heldoutLimit: TASKS });
    const { client } = services.temporal.temporal;
    const handle = await client.workflow.start<typeof shadowRun>('shadowRun', {
      taskQueue: config.temporal.taskQueue,
      workflowId: `shadow-cancelled-${Date.now()}`,
      args: [{ ...input, batchId: `${input.batchId}.cancelled` }],
    });
    await vi.waitFor(() => expect(services.gateway.router.mirrors()).toHaveLength(1), {
      timeout: 20_000,
      interval: 20,
    });
    await handle.cancel();
    await expect(handle.result()).rejects.toThrow();
    expect((await handle.describe()).status.name).toBe('CANCELLED');
    expect(services.gateway.router.mirrors()).toEqual([]);
  });

  it('says so when the gateway is unreachable', async () => {
    const elsewhere = path.join(dir, 'elsewhere.json');
    writeFileSync(elsewhere, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), gateway: { port: 1 } }));
    // The admin key lives beside the gateway secret in the data dir, which both configs share.
    expect(existsSync(path.join(config.dataDir, 'gateway', 'admin-key'))).toBe(true);
    const start = await runRein(['--config', elsewhere, 'shadow', 'start', CANDIDATE], { env });
    expect(start.code).toBe(1);
    expect(start.stderr).toContain('the gateway at http://127.0.0.1:1 is unreachable');
  });
});

describe('rein shadow run with no worker polling', () => {
  it('brings up the gateway, the policy server and a worker itself, and keeps stdout to the JSON', async () => {
    const alone = await writeExampleConfig(path.join(dir, 'alone'), { heldoutLimit: 2 });
    const run = await runRein(['--config', alone.file, 'shadow', 'run', 'v0', '--json'], { env });
    expect(run.code, `${run.stdout}\n${run.stderr.slice(-3000)}`).toBe(0);
    expect(run.stderr).toContain('No Rein worker polls task queue');
    const { result, report } = JSON.parse(run.stdout) as { result: ShadowRunResult; report: ShadowReport };
    expect(result).toMatchObject({
      incumbent: 'v0',
      rollouts: { total: 2 },
      report: { rollouts: 2, executionFailures: 0 },
    });
    expect(report.mirrored).toBeGreaterThanOrEqual(2);
    expect(report.actions.same).toBe(report.compared);
  }, 90_000);
});
