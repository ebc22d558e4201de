import { chmodSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { packageRoot } from '../package-root.js';
import { makePrivateDir } from './private-files.js';

const require = createRequire(import.meta.url);
let driver: typeof BetterSqlite3 | undefined;

/**
 * Opens a SQLite database with better-sqlite3 in the release that works on this Node.js: 13
 * (Node-API, prebuilt in its package) on Node 22 and later, where 12 aborts the process once a
 * statement is garbage-collected (Node 24.19 made node::ObjectWrap's finalizer need an entered
 * context); on Node 20, where 13 crashes at load, 12, which `npm run setup` builds on Node 20
 * and links as .tools/sqlite-node20 (outside node_modules, so no `npm install` prunes it).
 */
export function openDatabase(file: string, options?: BetterSqlite3.Options): BetterSqlite3.Database {
  driver ??= loadDriver();
  return new driver(file, options);
}

/**
 * Opens one of Rein's SQLite files, creating it (and its folder) readable by its owner only if it
 * is missing; a file that exists keeps its mode. SQLite creates the file and Rein narrows its mode
 * before anything is written (the -wal and -shm files take the database file's mode). Rein never
 * opens the file through a descriptor of its own: POSIX locks belong to the process, so closing
 * any descriptor of the file drops the locks SQLite's connections hold on it, and another
 * process's SQLite (an operator's `sqlite3` shell, a backup job) then believes it is alone, and
 * checkpoints and deletes the -wal and -shm files under Rein's open connections.
 */
export function openDatabaseFile(file: string): BetterSqlite3.Database {
  if (file === ':memory:') return openDatabase(file);
  makePrivateDir(path.dirname(file));
  const created = !existsSync(file);
  const db = openDatabase(file);
  if (created) chmodSync(file, 0o600);
  return db;
}

function loadDriver(): typeof BetterSqlite3 {
  const node = process.versions.node;
  if (Number(node.split('.')[0]) >= 22) return require('better-sqlite3') as typeof BetterSqlite3;
  try {
    return require(
      path.join(packageRoot(), '.tools', 'sqlite-node20', 'node_modules', 'better-sqlite3'),
    ) as typeof BetterSqlite3;
  } catch (err) {
    throw new Error(
      `Rein's SQLite driver for Node.js ${node} is not installed: on Node 20 it is better-sqlite3 12 (13 crashes there), ` +
        'which `npm run setup` builds on Node 20 into .tools/sqlite-node20. Run `npm run setup` with this Node.js, or use Node.js 22 or 24.',
      { cause: err },
    );
  }
}
