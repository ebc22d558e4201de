/**
 * One rollout set at scale: `--rollouts` rollouts (default 10,000) in ONE `rolloutSet` workflow
 * (mode train, sharded over the task queue) through `--workers` `rein worker` processes and
 * `--gateways` `rein gateway` processes sharing one PostgreSQL store, on the Temporal dev server,
 * all on this machine (bench/scale-setup.ts). The harness is as cheap as a real one can be (`sh`
 * and one curl chat call through the gateway), the backend a stand-in that answers at once with
 * token ids and log-probs (bench/upstream.ts), so what is measured is Rein's own cost:
 *
 * - worker CPU per rollout: each worker process's own utime+stime and its process launcher's (the
 *   child that spawns harnesses and verifiers), not the harnesses' or verifiers' own;
 * - gateway CPU per journaled call; Temporal server and PostgreSQL CPU per rollout;
 * - the set's workflow history (events, bytes, activity and workflow tasks);
 * - journal rows (calls + events) per second, and PostgreSQL's row writes per second;
 * - peak RSS per process; wall time and rollouts/s, against the same harness and verifier spawned
 *   directly (no Rein) at the same concurrency by a bare Node process, measured in the same run,
 *   with that process's CPU per rollout: the floor of spawning them, which the worker's CPU is
 *   also reported above.
 *
 *   npm run bench:scale [-- --rollouts 10000 --workers 4 --gateways 2] [--samples 8]
 *     [--shard-size 64] [--in-flight 8] [--concurrency 32] [--baseline 2000]
 *     [--eager-activities on|off]   (Temporal's eager activity dispatch: on as the dev server has it)
 *     [--max-activities N]   (each worker's worker.maxConcurrentActivities, so shards spread)
 *     [--profile DIR]   (node --cpu-prof of every gateway and worker, written to DIR when they stop)
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import pg from 'pg';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import { taskSetHash } from '../src/rollouts/tasks.js';
import { MODEL } from '../test/helpers/vllm-like-server.js';
import { launcherCpuMs, ownCpuMs, peakRssMb, treeCpuMs } from './scale-processes.js';
import { HARNESS_SCRIPT, startScaleCluster, TASK_QUEUE, VERIFIER_SCRIPT, type ScaleCluster } from './scale-setup.js';

const { values } = parseArgs({
  options: {
    rollouts: { type: 'string', default: '10000' },
    workers: { type: 'string', default: '4' },
    gateways: { type: 'string', default: '2' },
    samples: { type: 'string', default: '8' },
    'shard-size': { type: 'string', default: '64' },
    'in-flight': { type: 'string' },
    concurrency: { type: 'string', default: '32' },
    baseline: { type: 'string', default: '2000' },
    profile: { type: 'string' },
    'eager-activities': { type: 'string', default: 'on' },
    'max-activities': { type: 'string' },
  },
});
function positive(name: string, value: string | undefined): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} ${value}: expected a positive integer`);
  return n;
}
const rollouts = positive('rollouts', values.rollouts);
const samples = positive('samples', values.samples);
const workerCount = positive('workers', values.workers);
const settings = {
  rollouts,
  workers: workerCount,
  gateways: positive('gateways', values.gateways),
  samplesPerTask: samples,
  tasks: Math.ceil(rollouts / samples),
  shard: {
    size: positive('shard-size', values['shard-size']),
    inFlight: positive('in-flight', values['in-flight'] ?? String(2 * workerCount)),
  },
  concurrency: positive('concurrency', values.concurrency),
};
if (values['eager-activities'] !== 'on' && values['eager-activities'] !== 'off')
  throw new Error(`--eager-activities ${values['eager-activities']}: expected on or off`);
const baselineCount = Math.min(rollouts, positive('baseline', values.baseline));
if (settings.tasks * samples !== rollouts)
  throw new Error(`--rollouts ${rollouts}: expected a multiple of --samples ${samples}`);

const round = (x: number, digits = 2) => +x.toFixed(digits);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** Busy and total CPU ticks of the whole machine (every process, other users' too). */
function machineTicks(): { busy: number; total: number } {
  const fields = (/^cpu\s+(.*)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1] ?? '').split(/\s+/).map(Number);
  const total = sum(fields.slice(0, 8));
  return { busy: total - (fields[3] ?? 0) - (fields[4] ?? 0), total };
}

function cpuSnapshot(cluster: ScaleCluster) {
  return {
    workers: cluster.workers.map((w) => ownCpuMs(w.pid)),
    launchers: cluster.workers.map((w) => launcherCpuMs(w.pid)),
    gateways: cluster.gateways.map((g) => ownCpuMs(g.pid)),
    temporal: treeCpuMs(cluster.temporalPid),
    postgres: treeCpuMs(cluster.postgresPid),
    machine: machineTicks(),
  };
}

/** PostgreSQL's own count of rows written, by table (inserts + updates + deletes), and commits. */
async function pgWrites(db: pg.Pool) {
  const tables = await db.query<{ relname: string; w: string }>(
    'SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS w FROM pg_stat_user_tables',
  );
  const commits = await db.query<{ c: string }>(
    'SELECT xact_commit AS c FROM pg_stat_database WHERE datname = current_database()',
  );
  return {
    byTable: Object.fromEntries(tables.rows.map((r) => [r.relname, Number(r.w)])),
    commits: Number(commits.rows[0]?.c),
  };
}

function writeTasks(dir: string) {
  const tasks = Array.from({ length: settings.tasks }, (_, i) => ({ id: `t${i}`, question: '2+2', answer: 4 }));
  const file = path.join(dir, 'tasks.jsonl');
  writeFileSync(file, `${tasks.map((t) => JSON.stringify(t)).join('\n')}\n`);
  return { file, sha256: taskSetHash(tasks), ids: tasks.map((t) => t.id) };
}

/** Runs the set as one rolloutSet workflow; prints progress to stderr every 20 s. */
async function runSet(client: Client, db: pg.Pool, dir: string, batchId: string) {
  const taskSet = writeTasks(dir);
  const handle = await client.workflow.start('rolloutSet', {
    taskQueue: TASK_QUEUE,
    workflowId: `scale-${batchId}`,
    args: [
      {
        batchId,
        taskSet: { file: taskSet.file, sha256: taskSet.sha256 },
        taskIds: taskSet.ids,
        samplesPerTask: samples,
        mode: 'train',
        policyVersion: 'policy-v1',
        heartbeatTimeoutSeconds: 30,
        shards: settings.shard,
      },
    ],
  });
  const t0 = performance.now();
  const progress = setInterval(() => {
    void db
      .query<{ n: string }>("SELECT COUNT(*) AS n FROM rollouts WHERE id LIKE $1 AND status = 'succeeded'", [
        `${batchId}.%`,
      ])
      .then((r) =>
        process.stderr.write(
          `${Math.round((performance.now() - t0) / 1000)} s: ${r.rows[0]?.n} of ${rollouts} rollouts succeeded, load ${os.loadavg()[0]?.toFixed(1)}\n`,
        ),
      )
      .catch(() => {});
  }, 20_000);
  try {
    const summary = (await handle.result()) as RunRolloutsSummary;
    return { summary, seconds: (performance.now() - t0) / 1000, handle };
  } finally {
    clearInterval(progress);
  }
}

/** The set's history: its size and the Temporal tasks it took. */
async function historyOf(client: Client, workflowId: string) {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const count = (has: (e: (typeof events)[number]) => unknown) => events.filter(has).length;
  return {
    events: events.length,
    bytes: proto.temporal.api.history.v1.History.encode(history).finish().length,
    activityTasksScheduled: count((e) => e.activityTaskScheduledEventAttributes),
    activityTasksStarted: count((e) => e.activityTaskStartedEventAttributes),
    workflowTasksCompleted: count((e) => e.workflowTaskCompletedEventAttributes),
    /** Which worker (pid@host) started how many shards. */
    shardsStartedBy: Object.fromEntries(
      Object.entries(
        events.reduce<Record<string, number>>((by, e) => {
          const who = e.activityTaskStartedEventAttributes?.identity;
          if (who) by[who] = (by[who] ?? 0) + 1;
          return by;
        }, {}),
      ).sort((a, b) => b[1] - a[1]),
    ),
  };
}

/**
 * The loop of bench/scale.ts's baseline, run by a plain Node process (no Rein, nothing loaded, ~50
 * MB): the harness then the verifier, `concurrency` rollouts at once, their output read from pipes
 * as any runner must; prints the wall time and its own CPU, the floor any Node runner pays to spawn
 * and follow these two programs on this machine.
 */
const DIRECT_SPAWNER = `
const { spawn } = await import('node:child_process');
const [harness, verifier, upstreamUrl, model, concurrency, count, dir] = JSON.parse(process.argv[1]);
const run = (args, env) => new Promise((resolve, reject) => {
  const child = spawn('/bin/sh', args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', ...env } });
  child.stdout.on('data', () => undefined);
  child.stderr.on('data', () => undefined);
  child.once('error', reject);
  child.once('close', (code) => (code === 0 ? resolve() : reject(new Error('baseline run exited ' + code))));
});
const cpu = process.cpuUsage();
const t0 = performance.now();
let next = 0;
await Promise.all(Array.from({ length: concurrency }, async () => {
  while (next < count) {
    const output = dir + '/direct-' + next++ + '.json';
    await run(['-c', harness, 'harness', output], { OPENAI_BASE_URL: upstreamUrl, OPENAI_API_KEY: 'x', MODEL: model });
    await run(['-c', verifier, 'verifier', 'task', output], {});
  }
}));
const used = process.cpuUsage(cpu);
console.log(JSON.stringify({ seconds: (performance.now() - t0) / 1000, cpuMs: (used.user + used.system) / 1000 }));
`;

/** The same harness and verifier spawned directly (DIRECT_SPAWNER) against the backend itself: rollouts/s and CPU. */
async function directBaseline(upstreamUrl: string, concurrency: number, count: number, dir: string) {
  const args = JSON.stringify([HARNESS_SCRIPT, VERIFIER_SCRIPT, upstreamUrl, MODEL, concurrency, count, dir]);
  const child = spawn(process.execPath, ['--input-type=module', '-e', DIRECT_SPAWNER, args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  if (code !== 0) throw new Error(`the direct baseline exited with ${code}`);
  const { seconds, cpuMs } = JSON.parse(out) as { seconds: number; cpuMs: number };
  return {
    rollouts: count,
    concurrency,
    rolloutsPerSecond: round(count / seconds, 1),
    spawnerCpuMsPerRollout: round(cpuMs / count),
  };
}

async function journalRows(db: pg.Pool, batchId: string) {
  const like = `${batchId}.%`;
  const n = async (sql: string) => Number((await db.query<{ n: string }>(sql, [like])).rows[0]?.n);
  return {
    rollouts: await n('SELECT COUNT(*) AS n FROM rollouts WHERE id LIKE $1'),
    calls: await n('SELECT COUNT(*) AS n FROM calls WHERE rollout_id LIKE $1'),
    callsOk: await n("SELECT COUNT(*) AS n FROM calls WHERE rollout_id LIKE $1 AND status = 'ok'"),
    events: await n('SELECT COUNT(*) AS n FROM events WHERE rollout_id LIKE $1'),
  };
}

type Snapshot = ReturnType<typeof cpuSnapshot>;
type Writes = Awaited<ReturnType<typeof pgWrites>>;

/** The figures of one run, from the CPU snapshots and PostgreSQL's counters before and after the set. */
function figures(
  run: { seconds: number; before: Snapshot; after: Snapshot; writesBefore: Writes; writesAfter: Writes },
  journal: Awaited<ReturnType<typeof journalRows>>,
) {
  const { seconds, before, after } = run;
  const workerMs = after.workers.map((ms, i) => ms - (before.workers[i] as number));
  const launcherMs = after.launchers.map((ms, i) => ms - (before.launchers[i] as number));
  const gatewayMs = after.gateways.map((ms, i) => ms - (before.gateways[i] as number));
  const rowWrites = Object.entries(run.writesAfter.byTable)
    .map(([table, w]) => [table, w - (run.writesBefore.byTable[table] ?? 0)] as const)
    .filter(([, w]) => w > 0)
    .sort((a, b) => b[1] - a[1]);
  const machine = {
    busy: after.machine.busy - before.machine.busy,
    total: after.machine.total - before.machine.total,
  };
  return {
    wallSeconds: round(seconds, 1),
    rolloutsPerSecond: round(rollouts / seconds, 1),
    workerCpu: {
      msPerRollout: round((sum(workerMs) + sum(launcherMs)) / rollouts),
      workerProcessMsPerRollout: round(sum(workerMs) / rollouts),
      launcherMsPerRollout: round(sum(launcherMs) / rollouts),
      perWorkerSeconds: workerMs.map((ms) => round(ms / 1000, 1)),
      perLauncherSeconds: launcherMs.map((ms) => round(ms / 1000, 1)),
    },
    gatewayCpu: {
      msPerCall: round(sum(gatewayMs) / journal.calls),
      msPerRollout: round(sum(gatewayMs) / rollouts),
      perGatewaySeconds: gatewayMs.map((ms) => round(ms / 1000, 1)),
    },
    temporalServerCpuMsPerRollout: round((after.temporal - before.temporal) / rollouts),
    postgresCpuMsPerRollout: round((after.postgres - before.postgres) / rollouts),
    journal: {
      ...journal,
      rowsPerSecond: round((journal.calls + journal.events) / seconds, 1),
      postgresRowWritesPerSecond: round(sum(rowWrites.map(([, w]) => w)) / seconds, 1),
      postgresCommitsPerSecond: round((run.writesAfter.commits - run.writesBefore.commits) / seconds, 1),
      postgresRowWritesPerRollout: Object.fromEntries(rowWrites.map(([t, w]) => [t, round(w / rollouts)])),
    },
    machineBusyShareDuringSet: round(machine.busy / machine.total),
  };
}

async function main() {
  const loadAtStart = os.loadavg();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-scale-'));
  const cluster = await startScaleCluster({
    dir,
    workers: settings.workers,
    gateways: settings.gateways,
    concurrency: settings.concurrency,
    profileDir: values.profile && path.resolve(values.profile),
    eagerActivities: values['eager-activities'] !== 'off',
    ...(values['max-activities'] && { maxConcurrentActivities: Number(values['max-activities']) }),
  });
  const db = new pg.Pool({ connectionString: cluster.storeUrl, max: 2 });
  const connection = await Connection.connect({ address: cluster.temporalAddress });
  try {
    const client = new Client({ connection });
    const batchId = `scale-${randomBytes(3).toString('hex')}`;
    const writesBefore = await pgWrites(db);
    const before = cpuSnapshot(cluster);
    const set = await runSet(client, db, dir, batchId);
    const after = cpuSnapshot(cluster);
    await new Promise((r) => setTimeout(r, 1500)); // PostgreSQL flushes its table counters about every second
    const writesAfter = await pgWrites(db);
    const journal = await journalRows(db, batchId);
    const measured = figures({ seconds: set.seconds, before, after, writesBefore, writesAfter }, journal);
    const history = await historyOf(client, set.handle.workflowId);
    const peakRss = {
      workersMb: cluster.workers.map((w) => peakRssMb(w.pid)),
      gatewaysMb: cluster.gateways.map((g) => peakRssMb(g.pid)),
    };
    const setConcurrency = Math.ceil(settings.concurrency / settings.shard.inFlight) * settings.shard.inFlight;
    const baseline = await directBaseline(cluster.upstreamUrl, setConcurrency, baselineCount, dir);
    const { byStatus, unscored, meanReward } = set.summary;
    console.log(
      JSON.stringify(
        {
          date: new Date().toISOString(),
          cpus: os.cpus().length,
          node: process.version,
          loadAtStart: loadAtStart.map((l) => round(l)),
          loadAtEnd: os.loadavg().map((l) => round(l)),
          settings: {
            ...settings,
            setConcurrency,
            eagerActivities: values['eager-activities'],
            maxActivitiesPerWorker: values['max-activities'] ?? null,
          },
          result: { byStatus, unscored, meanReward },
          ...measured,
          history,
          peakRss,
          baseline,
          rolloutRateRatioVsDirect: round(measured.rolloutsPerSecond / baseline.rolloutsPerSecond, 3),
          // Rein's orchestration overhead: the worker's CPU (launcher included) above what spawning the same two
          // programs costs a bare Node runner on this machine.
          workerCpuAboveDirectMsPerRollout: round(measured.workerCpu.msPerRollout - baseline.spawnerCpuMsPerRollout),
        },
        null,
        2,
      ),
    );
  } finally {
    await connection.close();
    await db.end();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
