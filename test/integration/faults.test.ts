import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/store/sqlite-driver.js';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
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
// Each test starts its own services; the next one does not share the machine with them.
afterEach(async () => {
  await Promise.all([...processes].map((p) => p.stop('SIGKILL')));
});
afterAll(() => {
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
function followWith(process: RunningRein): void {
  follower = process;
  followerExited = false;
  void process.exited.then(() => {
    if (follower === process) followerExited = true;
  });
}

/** Reads a data directory's traces database as it is now (empty results before it exists). */
function tracesOf(dataDir: string) {
  return <T>(sql: string, ...params: unknown[]): T[] => {
    try {
      const db = openDatabase(path.join(dataDir, 'traces.sqlite'), { readonly: true, fileMustExist: true });
      try {
        return db.prepare(sql).all(...params) as T[];
      } finally {
        db.close();
      }
    } catch {
      return []; // not created yet
    }
  };
}

/**
 * Stands between a worker and the gateway and never answers the final status write of rollouts
 * whose id starts with `prefix` (their score is already recorded): killing the worker then is
 * killing it between a score and its status write.
 */
async function holdingFinalStatusWrites(
  gatewayUrl: string,
  prefix: string,
): Promise<{ url: string; held: Set<string>; close: () => Promise<void> }> {
  const held = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const id = /^\/api\/rollouts\/([^/?]+)\/status$/.exec(req.url ?? '')?.[1];
      if (
        req.method === 'POST' &&
        id &&
        decodeURIComponent(id).startsWith(prefix) &&
        (JSON.parse(body.toString()) as { status: string }).status !== 'running'
      ) {
        held.add(decodeURIComponent(id));
        return;
      }
      const upstream = http.request(
        new URL(req.url ?? '/', gatewayUrl),
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 300_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (followerExited)
      throw new Error(
        `\`rein train\` exited while waiting for ${what}:\n${follower?.output().stdout}\n${follower?.output().stderr}`,
      );
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
      {
        // Four held rollouts (the concurrency) make each fault's moment; more tasks add time, not faults.
        iterations: 2,
        tasksPerIteration: 4,
        samplesPerTask: 2,
        heldoutLimit: 4,
        heartbeatTimeoutSeconds: 5,
        base: { version: 'v0' },
      },
      {
        // Read back with SQL on the SQLite files; the same faults on PostgreSQL: many-services-postgres.test.ts.
        store: {},
        rollouts: { concurrency: 4, dependencyWaitSeconds: 120 },
        // With 2 samples a task, every group may agree; keeping them keeps the batch from being empty by chance.
        samples: { zeroVarianceGroups: 'keep' },
        harness: {
          version: 'calculator-agent-1',
          local: {
            command: process.execPath,
            args: [path.join(fixtures, 'held.mjs'), '{task}', '{output}'],
            envAllow: ['PATH', 'HOME'],
            env: { HOLD_DIR: holds, PID_DIR: pids, MISBEHAVE_PREFIX: `${runId}.it1.train-0.` },
            timeoutSeconds: 120,
          },
        },
      },
    );
    const config = JSON.parse(readFileSync(file, 'utf8')) as { policyServer: { port: number } };
    const query = tracesOf(dataDir);
    const running = (prefix: string) =>
      query<{ id: string }>("SELECT id FROM rollouts WHERE status = 'running' AND id LIKE ?", `${prefix}%`).length;
    const policyServer = () =>
      start(
        [
          '--config',
          file,
          'policy',
          'serve',
          '--model',
          `v0=${embeddedBaseCheckpoint()}`,
          '--port',
          String(config.policyServer.port),
        ],
        /Policy server ready/,
      );
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
    followWith(train.process);

    // 1. The model backend goes away while the base's held-out replay runs, and comes back.
    await until('the base replay to start', () => running('heldout.v0.') === 4);
    await policy.process.stop('SIGKILL');
    release('heldout.v0.');
    await until(
      'a call to fail while the backend is down',
      () => query("SELECT id FROM calls WHERE status = 'error' AND rollout_id LIKE 'heldout.v0.%'").length > 0,
    );
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
    expect(rollouts.length).toBe(4 + 2 * 8 + 2 * 4);
    expect(rollouts.filter((r) => r.status === 'cancelled' || r.status === 'running' || r.status === 'queued')).toEqual(
      [],
    );
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
    // once, and their second attempts ran on it. (A held harness whose first call came after the
    // reload, its release being up to 100 ms later than the others', was answered in attempt 1.)
    const second = rollouts.filter((r) => r.id.startsWith(`${runId}.it2.`));
    expect(second.filter((r) => r.attempts === 2).length).toBeGreaterThanOrEqual(1);
    expect(
      query('SELECT id FROM calls WHERE upstream_status = 404 AND rollout_id LIKE ?', `${runId}.it2.%`).length,
    ).toBeGreaterThanOrEqual(1);
    expect(Math.max(...second.map((r) => r.attempts))).toBe(2);
    // Scored once: at most one verifier reward per rollout.
    expect(
      query(
        "SELECT rollout_id, COUNT(*) AS n FROM events WHERE type = 'reward' AND source = 'admin' GROUP BY rollout_id HAVING n > 1",
      ),
    ).toEqual([]);
    // Every attempt that a later one superseded says why in the rollout's history, whichever component died.
    const explained = new Set(
      query<{ rollout_id: string; attempt: number }>(
        `SELECT rollout_id, attempt FROM events WHERE type = 'custom' AND payload LIKE '%"name":"attempt_failed"%'`,
      ).map((e) => `${e.rollout_id}#${e.attempt}`),
    );
    const superseded = rollouts.flatMap((r) => Array.from({ length: r.attempts - 1 }, (_, i) => `${r.id}#${i + 1}`));
    expect(superseded.filter((attempt) => !explained.has(attempt))).toEqual([]);
    // A fault of Rein's making is never blamed on the policy: no scored rollout's last attempt saw one.
    const blamed = query(
      `SELECT r.id FROM rollouts r JOIN calls c ON c.rollout_id = r.id AND c.attempt = r.attempts
       WHERE r.failure_class NOT IN ('infrastructure', 'orchestrator', 'verifier', 'environment')
         AND (c.error_class IN ('policy_unavailable', 'gateway_lost', 'upstream_unreachable', 'upstream_stream_cut') OR c.upstream_status >= 500 OR c.upstream_status = 404)`,
    );
    expect(blamed).toEqual([]);
    // The base's replay, damaged by the outage, was completed before it was compared with anything.
    const base = rollouts.filter((r) => r.id.startsWith('heldout.v0.'));
    expect(base).toHaveLength(4);
    expect(base.filter((r) => r.failure_class === 'infrastructure' || r.failure_class === 'orchestrator')).toEqual([]);

    // The killed trainer was retried: iteration 1's update took a second attempt, and succeeded;
    // the killed try's log (empty if it died before its first line) is kept beside the one that finished.
    expect(existsSync(path.join(dataDir, 'logs', `${runId}.v1.train.log.1`))).toBe(true);
    expect(readFileSync(path.join(dataDir, 'logs', `${runId}.v1.train.log`), 'utf8')).toMatch(/\S/);
    const { client, connection } = await testClient();
    try {
      const history = await client.workflow.getHandle(`${runId}-it1`).fetchHistory();
      const updateStarts = (history.events ?? []).filter(
        (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'updatePolicy',
      );
      expect(updateStarts).toHaveLength(1);
      const started = (history.events ?? []).flatMap((e) =>
        e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes] : [],
      );
      const scheduledId = updateStarts[0]!.eventId;
      expect(started.find((a) => String(a.scheduledEventId) === String(scheduledId))?.attempt).toBeGreaterThanOrEqual(
        2,
      );
    } finally {
      await connection.close();
    }

    // Each iteration trained once and has a verdict computed from scored pairs.
    const registry = openDatabase(path.join(dataDir, 'registry.sqlite'), { readonly: true });
    try {
      const versions = registry
        .prepare('SELECT version FROM policies WHERE run_id = ? ORDER BY iteration')
        .all(runId) as Array<{ version: string }>;
      expect(versions.map((v) => v.version)).toEqual([`${runId}.v1`, `${runId}.v2`]);
      const decisions = registry.prepare('SELECT verdict, record FROM decisions').all() as Array<{
        verdict: string;
        record: string;
      }>;
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
  it('a full disk stops a run with the reason and it resumes; a worker killed after a lost attempt answered, or between a score and its status write, neither scores the lost answer nor scores twice', async () => {
    const runId = 'lossy';
    const dir = path.join(scratch, runId);
    const holds = path.join(dir, 'holds');
    mkdirSync(holds, { recursive: true });
    const { file, dataDir } = await writeExampleConfig(
      dir,
      {
        iterations: 1,
        tasksPerIteration: 4,
        samplesPerTask: 2,
        heldoutLimit: 4,
        heartbeatTimeoutSeconds: 5,
        base: { version: 'v0' },
      },
      {
        store: {}, // read back with SQL on the SQLite files, as above
        rollouts: { concurrency: 8 },
        samples: { zeroVarianceGroups: 'keep' },
        harness: {
          version: 'calculator-agent-1',
          local: {
            command: process.execPath,
            args: [path.join(fixtures, 'held.mjs'), '{task}', '{output}'],
            envAllow: ['PATH', 'HOME'],
            env: { HOLD_DIR: holds, ORPHAN_PREFIX: `${runId}.it1.train-0.` },
            timeoutSeconds: 120,
          },
        },
      },
    );
    const config = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown> & {
      policyServer: { port: number };
      gateway: Record<string, unknown> & { port: number };
    };
    /** The same config with a change: what one worker's host differs in. */
    const variant = (name: string, change: Partial<typeof config>) => {
      const variantFile = path.join(dir, `${name}.json`);
      writeFileSync(variantFile, JSON.stringify({ ...config, ...change }, null, 2));
      return variantFile;
    };
    const query = tracesOf(dataDir);
    const worker = (configFile: string) => start(['--config', configFile, 'worker'], /Worker polling/);
    const policy = start(
      [
        '--config',
        file,
        'policy',
        'serve',
        '--model',
        `v0=${embeddedBaseCheckpoint()}`,
        '--port',
        String(config.policyServer.port),
      ],
      /Policy server ready/,
    );
    const gateway = start(['--config', file, 'gateway'], /Gateway ready/);
    // 1. The only worker's disk is below its floor: every stage refuses, saying why, and the run
    // stops with that reason; with space again (another worker), `rein resume` continues it.
    // (It starts beside the services: a worker reads the gateway's admin key only when it needs it.)
    const fullDisk = worker(variant('full-disk', { storage: { minFreeMegabytes: 2 ** 40 } }));
    await Promise.all([policy.ready, gateway.ready, fullDisk.ready]);
    const train = start(['--config', file, 'train', '--run-id', runId, '--follow']);
    expect(await train.process.exited).toBe(1);
    const refused = train.process.output();
    // Each refused try says why as it happens; the run's end says it again, and what to do next.
    expect(refused.stdout).toMatch(
      /attempt 1 of registerBasePolicy failed: only .* free under .*below the floor of 1\.0 EiB: free space there, or lower storage\.minFreeMegabytes/,
    );
    expect(refused.stdout).toMatch(
      /run lossy: failed \(.*below the floor of 1\.0 EiB.*\)\n`rein resume lossy` continues it/,
    );
    await fullDisk.process.stop('SIGTERM');

    // 2. The next worker reaches the gateway through a stand-in that never answers the final status
    // write of iteration 1's train-1 rollouts, and it is killed once those are scored and once
    // train-0's first attempts answered (their harnesses stay on, orphaned).
    const holder = await holdingFinalStatusWrites(`http://127.0.0.1:${config.gateway.port}`, `${runId}.it1.train-1.`);
    try {
      writeFileSync(path.join(holds, 'release-orphans'), '');
      const doomed = worker(variant('proxied', { gateway: { ...config.gateway, publicUrl: holder.url } }));
      await doomed.ready;
      const resumed = start(['--config', file, 'resume', runId, '--follow']);
      followWith(resumed.process);
      await until(
        'train-1 scored and its status write held, train-0 answered',
        () => holder.held.size === 2 && answered(`${runId}.it1.train-0.0`) && answered(`${runId}.it1.train-0.1`),
      );
      expect(
        query(
          "SELECT rollout_id FROM events WHERE type = 'reward' AND source = 'admin' AND rollout_id LIKE ?",
          `${runId}.it1.train-1.%`,
        ),
      ).toHaveLength(2);
      await doomed.process.stop('SIGKILL');
      const next = worker(file);
      await next.ready;
      rmSync(path.join(holds, 'release-orphans'));

      expect(
        await resumed.process.exited,
        `${resumed.process.output().stdout}\n${resumed.process.output().stderr}`,
      ).toBe(0);
      expect(resumed.process.output().stdout).toMatch(/run lossy: finished/);
    } finally {
      await holder.close();
    }

    const rollouts = query<{ id: string; status: string; failure_class: string | null; attempts: number }>(
      "SELECT id, status, failure_class, attempts FROM rollouts WHERE id LIKE 'lossy.%' OR id LIKE 'heldout.%'",
    );
    expect(rollouts.filter((r) => r.status === 'cancelled' || r.status === 'running' || r.status === 'queued')).toEqual(
      [],
    );
    const rewards = (id: string) =>
      query<{ attempt: number; payload: string }>(
        "SELECT attempt, payload FROM events WHERE type = 'reward' AND source = 'admin' AND rollout_id = ?",
        id,
      ).map((e) => ({ attempt: e.attempt, value: (JSON.parse(e.payload) as { value: number }).value }));
    // Scored between the kill and the status write: the score stands, the verifier did not run again.
    for (const id of [`${runId}.it1.train-1.0`, `${runId}.it1.train-1.1`]) {
      expect(rollouts.find((r) => r.id === id)).toMatchObject({ attempts: 1 });
      expect(rewards(id)).toHaveLength(1);
    }
    // The orphaned first attempt answered, but its answer is not the second attempt's: that one
    // crashed without an answer, and was scored as it did.
    for (const id of [`${runId}.it1.train-0.0`, `${runId}.it1.train-0.1`]) {
      expect(answered(id)).toBe(true);
      expect(rollouts.find((r) => r.id === id)).toMatchObject({
        status: 'failed',
        failure_class: 'harness',
        attempts: 2,
      });
      expect(rewards(id)).toEqual([{ attempt: 2, value: 0 }]);
    }
    expect(
      query(
        "SELECT rollout_id, COUNT(*) AS n FROM events WHERE type = 'reward' AND source = 'admin' GROUP BY rollout_id HAVING n > 1",
      ),
    ).toEqual([]);

    const registry = openDatabase(path.join(dataDir, 'registry.sqlite'), { readonly: true });
    try {
      const decisions = registry.prepare('SELECT verdict, record FROM decisions').all() as Array<{
        verdict: string;
        record: string;
      }>;
      expect(decisions).toHaveLength(1);
      const evidence = (JSON.parse(decisions[0]!.record) as { evidence: { pairs: number; scored: { pairs: number } } })
        .evidence;
      expect(evidence.scored.pairs).toBe(evidence.pairs);
    } finally {
      registry.close();
    }

    function answered(id: string): boolean {
      try {
        return (
          JSON.parse(readFileSync(path.join(dataDir, 'rollouts', id, 'attempt-1', 'output.json'), 'utf8')) !== null
        );
      } catch {
        return false; // not written yet, or half written
      }
    }
  }, 900_000);
});
