import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { embeddedBaseCheckpoint } from '../../src/config/embedded-default.js';
import { startRein, type RunningRein } from '../helpers/cli.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { freePort } from '../helpers/ports.js';
import { freshPostgresUrl } from '../helpers/postgres.js';
import { startTcpBalancer } from '../helpers/tcp-balancer.js';

/**
 * Rein past one machine's worth of processes: one PostgreSQL database for every store, two
 * gateways behind one address and two workers, with a gateway and a worker SIGKILLed mid-run.
 * The run must still end with every rollout scored once, no call left in flight, and one policy
 * version per iteration.
 */
const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-many-services-'));
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const processes = new Set<RunningRein>();
afterEach(async () => {
  await Promise.all([...processes].map((p) => p.stop('SIGKILL')));
});
afterAll(() => {
  if (!process.env.REIN_KEEP_TEST_DIRS) rmSync(scratch, { recursive: true, force: true });
});

const parentOf = (pid: number) => Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);

/** A held harness of a rollout with id `prefix…`: its parent (the launcher) and grandparent (the worker). */
function workerRunning(prefix: string): number[] {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0');
      if (!environ.some((v) => v.startsWith(`REIN_ROLLOUT_ID=${prefix}`))) continue;
      const launcher = parentOf(Number(entry));
      return [launcher, parentOf(launcher)];
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return [];
}

describe('two gateways and two workers on one PostgreSQL database', () => {
  it('finish a run with a gateway and a worker SIGKILLed mid-run: every rollout once, every call journaled, one version per iteration', async () => {
    const runId = 'spread';
    const holds = path.join(scratch, 'holds');
    mkdirSync(holds);
    const hold = (prefix: string) => writeFileSync(path.join(holds, prefix), '');
    const release = (prefix: string) => rmSync(path.join(holds, prefix));
    const gatewayPorts = [await freePort(), await freePort()] as const;
    const balancer = await startTcpBalancer(gatewayPorts);
    const { file } = await writeExampleConfig(
      scratch,
      {
        iterations: 2,
        tasksPerIteration: 4,
        samplesPerTask: 2,
        heldoutLimit: 4,
        heartbeatTimeoutSeconds: 5,
        base: { version: 'v0' },
      },
      {
        gateway: { port: gatewayPorts[0], publicUrl: balancer.url },
        rollouts: { concurrency: 4 },
        samples: { zeroVarianceGroups: 'keep' },
        harness: {
          version: 'calculator-agent-1',
          local: {
            command: process.execPath,
            args: [path.join(fixtures, 'held.mjs'), '{task}', '{output}'],
            envAllow: ['PATH', 'HOME'],
            env: { HOLD_DIR: holds },
            timeoutSeconds: 120,
          },
        },
      },
    );
    const storeUrl = await freshPostgresUrl();
    const db = new pg.Pool({ connectionString: storeUrl, max: 2 });
    const env = {
      TEMPORAL_ADDRESS: undefined,
      REIN_CONFIG: undefined,
      REIN_STORE_URL: storeUrl,
      REIN_GATEWAY_ADMIN_KEY: 'many-services-admin-key',
    };
    const start = (args: string[], ready: RegExp | undefined, extraEnv: Record<string, string> = {}) => {
      const child = startRein(['--config', file, ...args], { cwd: scratch, env: { ...env, ...extraEnv } });
      processes.add(child);
      void child.exited.then(() => processes.delete(child));
      return { process: child, ready: ready ? child.waitFor(ready, 120_000) : Promise.resolve() };
    };
    const query = async <T>(sql: string, ...params: unknown[]): Promise<T[]> => {
      try {
        return (await db.query(sql, params)).rows as T[];
      } catch (error) {
        if ((error as { code?: string }).code === '42P01') return []; // a table not created yet
        throw error;
      }
    };
    const train = { current: undefined as RunningRein | undefined };
    const until = async (what: string, probe: () => Promise<boolean>) => {
      const deadline = Date.now() + 600_000;
      while (!(await probe())) {
        if (train.current && !processes.has(train.current))
          throw new Error(
            `\`rein train\` exited while waiting for ${what}:\n${train.current.output().stdout}\n${train.current.output().stderr}`,
          );
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const running = async (prefix: string) =>
      (
        await query<{ n: string }>(
          "SELECT COUNT(*) AS n FROM rollouts WHERE status = 'running' AND id LIKE $1",
          `${prefix}%`,
        )
      )[0]?.n ?? '0';

    try {
      for (const prefix of [`${runId}.it1.`, `${runId}.it2.`]) hold(prefix);
      const policyPort = (JSON.parse(readFileSync(file, 'utf8')) as { policyServer: { port: number } }).policyServer
        .port;
      const policy = start(
        ['policy', 'serve', '--model', `v0=${embeddedBaseCheckpoint()}`, '--port', String(policyPort)],
        /Policy server ready/,
      );
      const gateway = (i: 0 | 1) => start(['gateway'], /Gateway ready/, { REIN_GATEWAY_PORT: String(gatewayPorts[i]) });
      const gateways = [gateway(0), gateway(1)];
      const workers = [start(['worker'], /Worker polling/), start(['worker'], /Worker polling/)];
      await Promise.all([policy.ready, ...gateways.map((g) => g.ready), ...workers.map((w) => w.ready)]);
      const run = start(['train', '--run-id', runId, '--follow'], undefined);
      train.current = run.process;

      // 1. Gateway one is SIGKILLed while iteration 1's harnesses call through both, and comes back.
      await until('iteration 1 rollouts to run', async () => Number(await running(`${runId}.it1.`)) >= 4);
      release(`${runId}.it1.`);
      const gatewayName = (port: number) => `${os.hostname()}:${port}`; // how a gateway names itself in the journal
      const gatewayOne = gatewayName(gatewayPorts[0]);
      await until(
        'iteration 1 calls through gateway one',
        async () =>
          (await query('SELECT id FROM calls WHERE gateway = $1 AND rollout_id LIKE $2', gatewayOne, `${runId}.it1.%`))
            .length > 0,
      );
      await gateways[0]!.process.stop('SIGKILL');
      gateways[0] = gateway(0);
      await gateways[0].ready;

      // 2. The worker running iteration 2's harnesses is SIGKILLed; the other takes its rollouts over.
      await until('iteration 2 rollouts to run', async () => Number(await running(`${runId}.it2.`)) >= 4);
      // A rollout is marked running before its harness is spawned: wait for a harness process too.
      await until('a harness of iteration 2 to be spawned', async () => workerRunning(`${runId}.it2.`).length > 0);
      const busy = workerRunning(`${runId}.it2.`);
      const doomed = workers.find((w) => w.process.pid !== undefined && busy.includes(w.process.pid));
      expect(doomed, 'the worker running iteration 2').toBeDefined();
      await doomed!.process.stop('SIGKILL');
      release(`${runId}.it2.`);

      const code = await run.process.exited;
      const { stdout, stderr } = run.process.output();
      expect(code, `${stdout}\n${stderr}`).toBe(0);
      expect(stdout).toMatch(/run spread: finished/);

      // Every rollout of the run, once, ended; no call left in flight; calls went through both gateways.
      const rollouts = await query<{ id: string; status: string; attempts: number }>(
        "SELECT id, status, attempts FROM rollouts WHERE id LIKE 'spread.%' OR id LIKE 'heldout.%'",
      );
      expect(rollouts.length).toBe(4 + 2 * 8 + 2 * 4);
      expect(new Set(rollouts.map((r) => r.id)).size).toBe(rollouts.length);
      expect(rollouts.filter((r) => ['cancelled', 'running', 'queued'].includes(r.status))).toEqual([]);
      expect(await query("SELECT id FROM calls WHERE status = 'in_flight'")).toEqual([]);
      expect(
        (await query<{ gateway: string }>('SELECT DISTINCT gateway FROM calls ORDER BY gateway')).map((r) => r.gateway),
      ).toEqual(gatewayPorts.map(gatewayName).sort());
      // The killed worker's rollouts ran again on the other worker, in a new attempt.
      expect(rollouts.filter((r) => r.id.startsWith(`${runId}.it2.train`) && r.attempts > 1).length).toBeGreaterThan(0);
      // Every call ended in the journal: answered, or (SIGKILLed in flight, the harness retrying it
      // through the other gateway) marked lost by the restarted gateway one.
      const unanswered = await query<{ gateway: string; error_class: string }>(
        `SELECT c.gateway, c.error_class FROM rollouts r JOIN calls c ON c.rollout_id = r.id AND c.attempt = r.attempts WHERE r.status = 'succeeded' AND c.status <> 'ok'`,
      );
      for (const call of unanswered) expect(call).toEqual({ gateway: gatewayOne, error_class: 'gateway_lost' });
      const withoutCalls = await query(
        `SELECT r.id FROM rollouts r WHERE r.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.rollout_id = r.id AND c.attempt = r.attempts)`,
      );
      // If one slips through, say what its journal holds: every call and event of every attempt.
      const journalOf = async (ids: string[]) =>
        JSON.stringify({
          rollouts: await query('SELECT id, status, status_reason, attempts FROM rollouts WHERE id = ANY($1)', ids),
          calls: await query(
            'SELECT rollout_id, attempt, seq, gateway, status, error_class FROM calls WHERE rollout_id = ANY($1) ORDER BY attempt, seq',
            ids,
          ),
          events: await query(
            'SELECT rollout_id, attempt, type, source, payload FROM events WHERE rollout_id = ANY($1) ORDER BY id',
            ids,
          ),
        });
      expect(withoutCalls, await journalOf(withoutCalls.map((r) => (r as { id: string }).id))).toEqual([]);
      // Scored once: at most one verifier reward per rollout.
      expect(
        await query(
          "SELECT rollout_id FROM events WHERE type = 'reward' AND source = 'admin' GROUP BY rollout_id HAVING COUNT(*) > 1",
        ),
      ).toEqual([]);
      // One version per iteration, each with its decision.
      expect(
        (
          await query<{ version: string }>('SELECT version FROM policies WHERE run_id = $1 ORDER BY iteration', runId)
        ).map((v) => v.version),
      ).toEqual([`${runId}.v1`, `${runId}.v2`]);
      expect(await query('SELECT id FROM decisions')).toHaveLength(2);
      // Nothing was kept in the shared data directory's SQLite files.
      expect(readdirSync(path.join(scratch, 'state')).filter((f) => f.endsWith('.sqlite'))).toEqual([]);
    } finally {
      await Promise.all([...processes].map((p) => p.stop('SIGKILL')));
      await balancer.close();
      await db.end();
    }
  }, 900_000);
});
