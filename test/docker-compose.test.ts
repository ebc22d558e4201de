import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { parse } from 'yaml';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { buildProgram } from '../src/cli/main.js';
import { workerIsPolling } from '../src/client/runs.js';
import { CONFIG_ENVIRONMENT, loadConfig, validateConfig } from '../src/config/load.js';
import type { DevServer } from '../src/devserver/dev-server.js';
import { withRegistry } from '../src/registry/open.js';
import type { RunningRein } from './helpers/cli.js';
import {
  delocalize,
  dependencies,
  fillMounts,
  imageOf,
  localize,
  mountPoints,
  parseVolume,
  readCompose,
  serviceEnvironment,
  startService,
  type ComposeService,
  type Localization,
} from './helpers/compose.js';
import { startTestDevServer } from './helpers/dev-server.js';
import { freePort } from './helpers/ports.js';

// No Docker engine runs on the development and CI machines: the compose file is checked against
// the project, and its Rein services run as local processes with their own commands and
// environments (test/helpers/compose.ts), on stand-ins for the third-party images.
const root = path.resolve(import.meta.dirname, '..');
const compose = readCompose(path.join(root, 'docker-compose.yml'));
const services = compose.services;
const image = imageOf(path.join(root, 'Dockerfile'));
const defaults = validateConfig({}, 'defaults');
const reinServices = Object.entries(services).filter(([, s]) => s.build !== undefined);
const service = (name: string) => services[name] as ComposeService;

function hostPort(s: ComposeService, containerPort: number): number | undefined {
  const mapping = s.ports?.find((p) => p.endsWith(`:${containerPort}`));
  return mapping ? Number(mapping.split(':')[0]) : undefined;
}

/** The config file a service mounts at its REIN_CONFIG, in the repository. */
function mountedConfig(s: ComposeService): string {
  const target = s.environment?.REIN_CONFIG;
  const mount = (s.volumes ?? []).map(parseVolume).find((v) => v.target === target);
  if (!mount) throw new Error(`no volume mounts REIN_CONFIG (${String(target)})`);
  return path.join(root, mount.source);
}

describe('docker-compose.yml', () => {
  it('runs Temporal on PostgreSQL with its Web UI, and Rein in its own database there', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining([
        'postgresql',
        'temporal',
        'temporal-ui',
        'rein-setup',
        'rein-policy',
        'rein-gateway',
        'rein-worker',
        'rein-api',
        'rein',
      ]),
    );
    expect(service('temporal').environment).toMatchObject({ DB: 'postgres12', POSTGRES_SEEDS: 'postgresql' });
    const init = (service('postgresql').volumes ?? [])
      .map(parseVolume)
      .find((v) => v.target === '/docker-entrypoint-initdb.d');
    expect(init, "an init script folder creates Rein's database").toBeDefined();
    const database = new URL(service('rein-gateway').environment?.REIN_STORE_URL ?? '').pathname.slice(1);
    expect(
      readdirSync(path.join(root, init?.source ?? ''))
        .map((f) => readFileSync(path.join(root, init?.source ?? '', f), 'utf8'))
        .join('\n'),
    ).toContain(`CREATE DATABASE ${database} `);
  });

  it('pins every third-party image to a version', () => {
    for (const [name, s] of Object.entries(services)) {
      if (s.build) continue;
      expect(s.image, name).toMatch(/^[\w./-]+:\d[\w.-]*$/);
    }
  });

  it('publishes Temporal and its UI on the same ports as the embedded dev server', () => {
    expect(hostPort(service('temporal'), 7233)).toBe(defaults.temporal.devServer.port);
    expect(hostPort(service('temporal-ui'), 8080)).toBe(defaults.temporal.devServer.uiPort);
  });

  it('builds Rein services from the Dockerfile, whose image holds every path of it they use', () => {
    expect(image.entrypoint).toEqual(['node', 'bin/rein.js']);
    const inImage = (p: string) => image.copied.some((c) => p === c || p.startsWith(`${c}/`));
    const used = JSON.stringify([services, parse(readFileSync(path.join(root, 'deploy/rein.yaml'), 'utf8'))]);
    for (const p of used.match(new RegExp(`(?<=["=])${image.workdir}/[\\w./-]+`, 'g')) ?? [])
      expect(inImage(p), p).toBe(true);
    // The policy server's checkpoint, relative to the image's folder.
    for (const [, s] of reinServices)
      for (const arg of s.command ?? [])
        if (/^\w+=\w/.test(arg)) expect(inImage(`${image.workdir}/${arg.split('=')[1]}`), arg).toBe(true);
    for (const [name, s] of reinServices) {
      const context = typeof s.build === 'string' ? s.build : (s.build?.context ?? '.');
      expect(existsSync(path.join(root, context, 'Dockerfile')), name).toBe(true);
    }
  });

  it('gives Rein services only CLI commands and environment variables that Rein knows', async () => {
    const commands = (await buildProgram()).commands.map((c) => c.name());
    // NODE_ENV: the image's, for Node and its libraries.
    const known = new Set([...CONFIG_ENVIRONMENT.map(([variable]) => variable), 'REIN_CONFIG', 'NODE_ENV']);
    for (const [name, s] of reinServices) {
      // An option alone (the CLI service's `--help`) is fine; a first word must be a command.
      if (!s.command?.[0]?.startsWith('-')) expect(commands, name).toContain(s.command?.[0]);
      for (const variable of Object.keys({ ...image.env, ...s.environment }))
        expect(known, `${name}: ${variable}`).toContain(variable);
    }
  });

  it('gives every Rein service one config file, one store and one data volume', () => {
    const shared = (s: ComposeService) => ({ config: mountedConfig(s), env: s.environment, volumes: s.volumes });
    for (const [name, s] of reinServices) expect(shared(s), name).toEqual(shared(service('rein-worker')));
    const { config } = loadConfig({
      file: mountedConfig(service('rein-worker')),
      env: { ...image.env, ...service('rein-worker').environment, REIN_CONFIG: undefined },
    });
    expect(config.store.url).toMatch(/^postgres:\/\/\w+:\w+@postgresql:5432\/\w+$/);
    expect(config.temporal.address).toBe('temporal:7233');
    expect(config.dataDir).toBe('/data');
    expect((service('rein-worker').volumes ?? []).map(parseVolume)).toContainEqual({
      source: 'rein-data',
      target: '/data',
      named: true,
    });
    // The gateway and the API listen on all interfaces, on the ports the file publishes.
    expect(config.gateway.host).toBe('0.0.0.0');
    expect(hostPort(service('rein-gateway'), config.gateway.port)).toBe(config.gateway.port);
    expect(config.api.host).toBe('0.0.0.0');
    expect(hostPort(service('rein-api'), config.api.port)).toBe(config.api.port);
  });

  it('depends only on services it defines', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const [dep] of dependencies(s)) expect(Object.keys(services), `${name} → ${dep}`).toContain(dep);
    }
  });
});

describe('docker-compose.yml, its Rein services as local processes', () => {
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-compose-'));
  const running: RunningRein[] = [];
  let temporal: DevServer | undefined;
  afterAll(async () => {
    for (const p of running.reverse()) await p.stop('SIGINT');
    await temporal?.stop();
    if (!process.env.REIN_KEEP_TEST_DIRS) rmSync(scratch, { recursive: true, force: true });
  });

  it(
    'runs a short training through them: the journal and the registry in PostgreSQL, artifacts on the volume',
    { timeout: 600_000 },
    async () => {
      // Stand-ins for the third-party images, which cannot run here: PostgreSQL is the test run's
      // server, running the compose file's init scripts as the postgres image would; Temporal is a
      // dev server of this test's own (the compose worker polls the default task queue, which other
      // tests' workers on the shared one poll too); the Temporal UI is not run.
      const adminUrl = new URL(inject('postgresAdminUrl'));
      const initDir =
        (service('postgresql').volumes ?? []).map(parseVolume).find((v) => v.target === '/docker-entrypoint-initdb.d')
          ?.source ?? '';
      const admin = new pg.Client({ connectionString: adminUrl.toString() });
      await admin.connect();
      try {
        for (const file of readdirSync(path.join(root, initDir))
          .filter((f) => f.endsWith('.sql'))
          .sort()) {
          const sql = readFileSync(path.join(root, initDir, file), 'utf8').replace(/^--.*$/gm, '');
          // psql runs statement by statement; CREATE DATABASE cannot share a transaction.
          for (const statement of sql
            .split(/;\s*$/m)
            .map((s) => s.trim())
            .filter(Boolean))
            await admin.query(statement);
        }
      } finally {
        await admin.end();
      }
      const temporalPort = await freePort();
      temporal = await startTestDevServer(path.join(scratch, 'temporal.sqlite'), temporalPort);

      // The one place the compose network and the containers' file systems move to this machine.
      const started = reinServices.filter(([, s]) => !s.profiles);
      const gatewayPort = await freePort();
      const policyPort = await freePort();
      const apiPort = await freePort();
      const here: Localization = {
        endpoints: {
          'postgresql:5432': adminUrl.host,
          'temporal:7233': temporal.address,
          'rein-gateway:8400': `127.0.0.1:${gatewayPort}`,
          'rein-policy:8401': `127.0.0.1:${policyPort}`,
          'rein-api:8402': `127.0.0.1:${apiPort}`,
        },
        ports: { 8400: gatewayPort, 8401: policyPort, 8402: apiPort },
        // The image's folder holds the built repository; here it is the repository.
        paths: {
          [image.workdir]: root,
          ...mountPoints(
            reinServices.map(([, s]) => s),
            path.join(scratch, 'fs'),
          ),
        },
      };
      fillMounts(
        reinServices.map(([, s]) => s),
        root,
        here,
      );

      // Nothing but those moved: each service's command, environment and config read back as the files say.
      const configTarget = service('rein-worker').environment?.REIN_CONFIG ?? '';
      const localConfig = here.paths[configTarget] ?? '';
      expect(delocalize(parse(readFileSync(localConfig, 'utf8')), here)).toEqual(
        parse(readFileSync(mountedConfig(service('rein-worker')), 'utf8')),
      );
      const composeNames = new RegExp(`(${Object.keys(services).join('|')}):\\d+`);
      expect(readFileSync(localConfig, 'utf8')).not.toMatch(composeNames);
      for (const [name, s] of reinServices) {
        const env = serviceEnvironment(s, image.env, here);
        const given = Object.fromEntries(
          Object.entries(env).filter(([k, v]) => v !== undefined && k !== 'PATH' && k !== 'HOME'),
        );
        expect(delocalize(given, here), name).toEqual({ ...image.env, ...s.environment });
        expect(JSON.stringify(given), name).not.toMatch(composeNames);
        expect(delocalize(localize(s.command, here), here), name).toEqual(s.command);
      }

      // Started in the order depends_on gives, on its conditions: `service_started` waits for the
      // process to start, `service_completed_successfully` for it to exit 0; the stand-ins are up already.
      const launched = new Map<string, Promise<RunningRein | undefined>>();
      const conditionMet = async (name: string, condition: string): Promise<void> => {
        const child = await launch(name);
        if (!child || condition !== 'service_completed_successfully') return;
        const code = await child.exited;
        if (code !== 0)
          throw new Error(`${name} exited with ${String(code)}:\n${child.output().stdout}\n${child.output().stderr}`);
      };
      const launch = (name: string): Promise<RunningRein | undefined> => {
        const s = service(name);
        if (!s.build) return Promise.resolve(undefined);
        const known = launched.get(name);
        if (known) return known;
        const launching = (async () => {
          await Promise.all(dependencies(s).map(([dep, condition]) => conditionMet(dep, condition)));
          const child = startService(s, image.env, root, here);
          running.push(child);
          return child;
        })();
        launched.set(name, launching);
        return launching;
      };
      // Then every long-running service answers, and every one-shot ends well.
      const ready: Record<string, RegExp> = {
        policy: /Policy server ready/,
        gateway: /Gateway ready/,
        worker: /Worker polling/,
        api: /HTTP API ready/,
      };
      await Promise.all(
        started.map(async ([name, s]) => {
          const pattern = ready[s.command?.[0] ?? ''];
          if (pattern) await (await launch(name))?.waitFor(pattern, 300_000);
          else await conditionMet(name, 'service_completed_successfully');
        }),
      );

      // `rein train` must find the compose worker polling, not start services of its own.
      const connection = await Connection.connect({ address: temporal.address });
      try {
        const client = new Client({ connection });
        const queue = loadConfig({ file: localConfig, env: {} }).config.temporal.taskQueue;
        const worker = await launch('rein-worker');
        let workerExited = false;
        void worker?.exited.then(() => (workerExited = true));
        while (!(await workerIsPolling(client, queue))) {
          if (workerExited) throw new Error(`rein-worker exited:\n${worker?.output().stderr ?? ''}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      } finally {
        await connection.close();
      }

      // `docker compose run --rm rein train …`: the CLI service with the command given on the line.
      const runId = 'compose-1';
      const train = startService(service('rein'), image.env, root, here, [
        'train',
        '--run-id',
        runId,
        '--follow',
        '--iterations',
        '1',
        '--tasks',
        '4',
        '--samples',
        '4',
        '--heldout',
        '2',
      ]);
      running.push(train);
      const code = await train.exited;
      const { stdout, stderr } = train.output();
      console.log(stdout); // the evidence, in the test log
      expect(code, `${stdout}\n${stderr}`).toBe(0);
      expect(stdout).not.toContain('No Rein worker polls');
      expect(stdout).toMatch(new RegExp(`run ${runId}: finished`));

      // The journal, the registry and the ledger are in the `rein` database; no SQLite file anywhere on the volume.
      const storeUrl = localize(service('rein-worker').environment?.REIN_STORE_URL ?? '', here);
      const db = new pg.Client({ connectionString: storeUrl });
      await db.connect();
      try {
        const calls = await db.query<{ n: string }>(
          "SELECT COUNT(*) AS n FROM calls WHERE rollout_id LIKE $1 AND status = 'ok'",
          [`${runId}.%`],
        );
        expect(Number(calls.rows[0]?.n)).toBeGreaterThan(0);
      } finally {
        await db.end();
      }
      const dataDir = here.paths['/data'] ?? '';
      const files = readdirSync(dataDir, { recursive: true }).map(String);
      expect(files.filter((f) => /\.sqlite/.test(f))).toEqual([]);
      const registered = await withRegistry({ dataDir, postgresUrl: storeUrl }, (registry) => registry.list({ runId }));
      expect(registered.map((r) => [r.version, r.parent, r.iteration])).toEqual([[`${runId}.v1`, 'v0', 1]]);
      // Its checkpoint and batch on the shared volume, where the policy server and the worker both read them.
      expect(registered[0]?.checkpointUri.startsWith(dataDir)).toBe(true);
      expect(files.some((f) => f.startsWith('artifacts/'))).toBe(true);

      // The API service reads the same run, with the gateway's admin key from the volume.
      const key = readFileSync(path.join(dataDir, 'gateway', 'admin-key'), 'utf8').trim();
      const run = await fetch(`http://127.0.0.1:${apiPort}/api/runs/${runId}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(run.status).toBe(200);
      expect(await run.json()).toMatchObject({ execution: 'COMPLETED' });
    },
  );
});

describe("the PyTorch trainer's image", () => {
  it('carries everything the trainer reads: its package with the config schema, the lock, the FSDP config', () => {
    const text = readFileSync(path.join(root, 'trainer', 'Dockerfile'), 'utf8');
    const copied = [...text.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => (m[1] as string).split(/\s+/));
    expect(copied).toEqual(
      expect.arrayContaining(['requirements.lock', 'pyproject.toml', 'fsdp.yaml', 'rein_trainer']),
    );
    for (const file of copied) expect(existsSync(path.join(root, 'trainer', file)), file).toBe(true);
    // The package installs with the JSON Schema its config is checked against.
    expect(readFileSync(path.join(root, 'trainer', 'pyproject.toml'), 'utf8')).toMatch(
      /\[tool\.setuptools\.package-data\]\n(?:#.*\n)*rein_trainer = \["trainer_config\.schema\.json"\]/,
    );
  });
});
