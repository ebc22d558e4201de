import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedBaseCheckpoint } from '../../src/config/embedded-default.js';
import { startRein, type RunningRein } from '../helpers/cli.js';
import { testClient } from '../helpers/temporal.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { isRunning } from '../helpers/processes.js';

/**
 * The fault suite: Rein's services as separate processes (policy server, gateway, two workers,
 * `rein train --follow`), and faults injected into one short run as an operator would meet them.
 * Each fault is triggered by the state it needs (never by a timer), and the run must end with
 * every rollout scored once and verdicts computed from scored rollouts only.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-faults-'));
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined, REIN_GATEWAY_ADMIN_KEY: undefined };
const processes = new Set<RunningRein>();
afterAll(async () => {
  await Promise.all([...processes].map((p) => p.stop('SIGKILL')));
  if (!process.env.REIN_KEEP_TEST_DIRS) rmSync(scratch, { recursive: true, force: true });
});

function start(args: string[], ready?: RegExp): { process: RunningRein; ready: Promise<void> } {
  const child = startRein(args, { cwd: scratch, env });
  processes.add(child);
  void child.exited.then(() => processes.delete(child));
  return { process: child, ready: ready ? child.waitFor(ready, 120_000) : Promise.resolve() };
}

/** The run's own process: a wait for the run's state ends early, with its output, if it exits. */
let follower: RunningRein | undefined;
let followerExited = false;

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 300_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (followerExited) throw new Error(`\`rein train\` exited while waiting for ${what}:\n${follower?.output().stdout}\n${follower?.output().stderr}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The pid of the trainer process writing `out` (the tfjs trainer: `rein policy train … --out DIR`). */
function trainerPid(out: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.includes('train') && argv.includes(out)) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

describe('faults never change a verdict', () => {
  it('a run survives a backend outage, a worker shutdown, a misbehaving harness, a killed trainer, and a killed gateway and backend, and scores every rollout once', async () => {
    const runId = 'faulty';
    // A file in holds/ named after a rollout-id prefix keeps those rollouts waiting in their harness.
    const holds = path.join(scratch, 'holds');
    mkdirSync(holds);
    const pids = path.join(scratch, 'pids');
    mkdirSync(pids);
    const hold = (prefix: string) => writeFileSync(path.join(holds, prefix), '');
    const release = (prefix: string) => rmSync(path.join(holds, prefix));
    const { file, dataDir } = await writeExampleConfig(
      scratch,
      { iterations: 2, tasksPerIteration: 6, samplesPerTask: 2, heldoutLimit: 8, heartbeatTimeoutSeconds: 5, base: { version: 'v0' } },
      {
        rollouts: { concurrency: 4, dependencyWaitSeconds: 120 },
        // With 2 samples a task, every group may agree; keeping them keeps the batch from being empty by chance.
        samples: { zeroVarianceGroups: 'keep' },
        harness: {
          version: 'calculator-agent-1',
          local: { command: process.execPath, args: [path.join(fixtures, 'held.mjs'), '{task}', '{output}'], envAllow: ['PATH', 'HOME'], env: { HOLD_DIR: holds, PID_DIR: pids, MISBEHAVE_PREFIX: `${runId}.it1.train-0.` }, timeoutSeconds: 120 },
        },
      },
    );
    const config = JSON.parse(readFileSync(file, 'utf8')) as { policyServer: { port: number } };
    const traces = () => new Database(path.join(dataDir, 'traces.sqlite'), { readonly: true, fileMustExist: true });
    const query = <T>(sql: string, ...params: unknown[]): T[] => {
      try {
        const db = traces();
        try {
          return db.prepare(sql).all(...params) as T[];
        } finally {
          db.close();
        }
      } catch {
        return []; // not created yet
      }
    };
    const running = (prefix: string) => query<{ id: string }>("SELECT id FROM rollouts WHERE status = 'running' AND id LIKE ?", `${prefix}%`).length;
    const policyServer = () => start(['policy', 'serve', '--model', `v0=${embeddedBaseCheckpoint()}`, '--port', String(config.policyServer.port)], /Policy server ready/);
    const gatewayProcess = () => start(['--config', file, 'gateway'], /Gateway ready/);
    const worker = () => start(['--config', file, 'worker'], /Worker polling/);

    for (const prefix of ['heldout.v0.', `${runId}.it1.`, `${runId}.it2.`]) hold(prefix);
    // The worker starts before the gateway has ever run (it reads the admin key the gateway writes when it needs it).
    const firstWorker = worker();
    await firstWorker.ready;
    let policy = policyServer();
    let gateway = gatewayProcess();
    await Promise.all([policy.ready, gateway.ready]);
    const train = start(['--config', file, 'train', '--run-id', runId, '--follow']);
    follower = train.process;
    void train.process.exited.then(() => (followerExited = true));

    // 1. The model backend goes away while the base's held-out replay runs, and comes back.
    await until('the base replay to start', () => running('heldout.v0.') === 4);
    await policy.process.stop('SIGKILL');
    release('heldout.v0.');
    await until('a call to fail while the backend is down', () => query("SELECT id FROM calls WHERE status = 'error' AND rollout_id LIKE 'heldout.v0.%'").length > 0);
    policy = policyServer();
    await policy.ready;

    // 2. The worker running iteration 1's rollouts is shut down (SIGTERM) mid-way; another takes over.
    await until('iteration 1 rollouts to run', () => running(`${runId}.it1.`) === 4);
    const secondWorker = worker();
    await secondWorker.ready;
    expect(await firstWorker.process.stop('SIGTERM')).toBe(0);
    release(`${runId}.it1.`);

    // 3. The trainer is killed (as the OOM killer would) during iteration 1's update.
    const out = path.join(dataDir, 'policies', runId, `${runId}.v1`);
    const pid = await until('the iteration 1 trainer to start', () => trainerPid(out));
    process.kill(pid, 'SIGKILL');

    // 4. The gateway and the backend are killed and restarted while iteration 2's rollouts, pinned
    // to the trained v1, wait: the new gateway must route v1 again, and the new backend, which
    // serves only the base, must be given v1 again when the first calls get its 404.
    await until('iteration 2 rollouts to run', () => running(`${runId}.it2.`) === 4, 600_000);
    await Promise.all([gateway.process.stop('SIGKILL'), policy.process.stop('SIGKILL')]);
    policy = policyServer();
    gateway = gatewayProcess();
    await Promise.all([policy.ready, gateway.ready]);
    release(`${runId}.it2.`);

    const code = await train.process.exited;
    const { stdout, stderr } = train.process.output();
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(stdout).toMatch(/run faulty: finished/);

    // Every rollout of the run ended, none was cancelled by a shutdown, none left in flight.
    const rollouts = query<{ id: string; status: string; failure_class: string | null; attempts: number }>(
      "SELECT id, status, failure_class, attempts FROM rollouts WHERE id LIKE 'faulty.%' OR id LIKE 'heldout.%'",
    );
    expect(rollouts.length).toBe(8 + 2 * 12 + 2 * 8);
    expect(rollouts.filter((r) => r.status === 'cancelled' || r.status === 'running' || r.status === 'queued')).toEqual([]);
    expect(query("SELECT id FROM calls WHERE status = 'in_flight'")).toEqual([]);
    // The shutdown handed iteration 1's rollouts back: the next worker ran them in a new attempt.
    expect(rollouts.filter((r) => r.id.startsWith(`${runId}.it1.`) && r.attempts > 1).length).toBeGreaterThanOrEqual(4);
    // A harness that flooded its log and left a setsid child holding its output: its exit ended
    // its run (no timeout), the child is dead, and the log kept head and tail under the cap.
    const misbehaved = rollouts.filter((r) => r.id.startsWith(`${runId}.it1.train-0.`));
    expect(misbehaved.map((r) => r.failure_class)).toEqual([null, null]);
    const escaped = readdirSync(pids).map((f) => Number(readFileSync(path.join(pids, f), 'utf8')));
    expect(escaped.length).toBeGreaterThanOrEqual(2);
    for (const pid of escaped) expect(isRunning(pid), `escaped child ${pid}`).toBe(false);
    for (const r of misbehaved) {
      const log = readFileSync(path.join(dataDir, 'rollouts', r.id, `harness-${r.attempts}.log`), 'utf8');
      expect(log.length).toBeLessThan(8 * 1024 * 1024 + 1024);
      expect(log).toMatch(/\[rein: \d+ bytes cut here/);
    }
    // Iteration 2's first attempts met a backend that had forgotten v1 (404): it was loaded again at
    // once, and their second attempts ran on it.
    const second = rollouts.filter((r) => r.id.startsWith(`${runId}.it2.`));
    expect(second.filter((r) => r.attempts === 2).length).toBeGreaterThanOrEqual(4);
    expect(Math.max(...second.map((r) => r.attempts))).toBe(2);
    // Scored once: at most one verifier reward per rollout.
    expect(query("SELECT rollout_id, COUNT(*) AS n FROM events WHERE type = 'reward' AND source = 'admin' GROUP BY rollout_id HAVING n > 1")).toEqual([]);
    // A fault of Rein's making is never blamed on the policy: no scored rollout's last attempt saw one.
    const blamed = query(
      `SELECT r.id FROM rollouts r JOIN calls c ON c.rollout_id = r.id AND c.attempt = r.attempts
       WHERE r.failure_class NOT IN ('infrastructure', 'orchestrator', 'verifier', 'environment')
         AND (c.error_class IN ('policy_unavailable', 'gateway_lost', 'upstream_unreachable', 'upstream_stream_cut') OR c.upstream_status >= 500 OR c.upstream_status = 404)`,
    );
    expect(blamed).toEqual([]);
    // The base's replay, damaged by the outage, was completed before it was compared with anything.
    const base = rollouts.filter((r) => r.id.startsWith('heldout.v0.'));
    expect(base).toHaveLength(8);
    expect(base.filter((r) => r.failure_class === 'infrastructure' || r.failure_class === 'orchestrator')).toEqual([]);

    // The killed trainer was retried: iteration 1's update took a second attempt, and succeeded.
    const { client, connection } = await testClient();
    try {
      const history = await client.workflow.getHandle(`${runId}-it1`).fetchHistory();
      const updateStarts = (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'updatePolicy');
      expect(updateStarts).toHaveLength(1);
      const started = (history.events ?? []).flatMap((e) => (e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes] : []));
      const scheduledId = updateStarts[0]!.eventId;
      expect(started.find((a) => String(a.scheduledEventId) === String(scheduledId))?.attempt).toBeGreaterThanOrEqual(2);
    } finally {
      await connection.close();
    }

    // Each iteration trained once and has a verdict computed from scored pairs.
    const registry = new Database(path.join(dataDir, 'registry.sqlite'), { readonly: true });
    try {
      const versions = registry.prepare('SELECT version FROM policies WHERE run_id = ? ORDER BY iteration').all(runId) as Array<{ version: string }>;
      expect(versions.map((v) => v.version)).toEqual([`${runId}.v1`, `${runId}.v2`]);
      const decisions = registry.prepare('SELECT verdict, record FROM decisions').all() as Array<{ verdict: string; record: string }>;
      expect(decisions).toHaveLength(2);
      for (const d of decisions) {
        const evidence = (JSON.parse(d.record) as { evidence: { pairs: number; scored: { pairs: number } } }).evidence;
        expect(['pass', 'fail']).toContain(d.verdict);
        expect(evidence.scored.pairs).toBe(evidence.pairs);
      }
    } finally {
      registry.close();
    }
  }, 900_000);
});
