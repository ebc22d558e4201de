import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openLedger } from '../../src/ledger/open.js';
import { openRegistry } from '../../src/registry/open.js';
import { openTraceStore } from '../../src/store/open.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-sqlite-reader-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * What another process reads from the file, opening and closing it as an operator's `sqlite3` shell
 * or a backup job does: the system's SQLite (the shell where installed, else Python's sqlite3
 * module on the same library). On closing, it deletes the -wal and -shm files if it can lock the
 * database file exclusively, i.e. if it believes no other connection has it open.
 */
function readElsewhere(file: string, sql: string): unknown[] {
  const shell = spawnSync('sqlite3', ['-json', file, sql], { encoding: 'utf8' });
  if (!shell.error) {
    if (shell.status !== 0) throw new Error(`sqlite3 failed: ${shell.stderr}`);
    return JSON.parse(shell.stdout || '[]') as unknown[];
  }
  const python =
    'import json, sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.row_factory = sqlite3.Row\nrows = [dict(r) for r in db.execute(sys.argv[2])]\ndb.close()\nprint(json.dumps(rows))';
  return JSON.parse(execFileSync('python3', ['-c', python, file, sql], { encoding: 'utf8' })) as unknown[];
}

const lineage = (version: string, parent: string | null) => ({
  version,
  parent,
  runId: 'r',
  iteration: 0,
  checkpointUri: `/ckpt/${version}`,
  batchContentHash: null,
  trainerMetrics: {},
});

describe('an external reader of the SQLite files while Rein writes them', () => {
  it('leaves the registry and ledger files whole: Rein keeps its WAL, both see every write, nothing is lost', async () => {
    const location = { dataDir: path.join(scratch, 'registry'), postgresUrl: null };
    const file = path.join(location.dataDir, 'registry.sqlite');
    // Held open for the whole test, as `rein dev`'s API and worker hold theirs.
    const held = await openRegistry(location);
    try {
      await held.register(lineage('v0', null));
      // Rein opens and closes the same files again meanwhile, as each CLI command and activity does.
      for (let i = 0; i < 2; i++) {
        await (await openLedger(location)).close();
        await (await openRegistry(location)).close();
      }
      expect(readElsewhere(file, 'SELECT version FROM policies')).toEqual([{ version: 'v0' }]);
      // SQLite's reader found Rein's connection and left the write-ahead log in place.
      expect(existsSync(`${file}-wal`)).toBe(true);
      await held.register(lineage('v1', 'v0'));
      expect(readElsewhere(file, 'SELECT version FROM policies ORDER BY version')).toEqual([
        { version: 'v0' },
        { version: 'v1' },
      ]);
      expect((await held.list()).map((p) => p.version).sort()).toEqual(['v0', 'v1']);
    } finally {
      await held.close();
    }
    const reopened = await openRegistry(location);
    expect((await reopened.list()).map((p) => p.version).sort()).toEqual(['v0', 'v1']);
    await reopened.close();
  });

  it('leaves the trace store whole while another connection of the same process journals', async () => {
    const dataDir = path.join(scratch, 'traces');
    const file = path.join(dataDir, 'traces.sqlite');
    const held = await openTraceStore({ dataDir, postgresUrl: null }, file);
    try {
      await held.createRollout({ id: 'before', taskId: 't' });
      const other = await openTraceStore({ dataDir, postgresUrl: null }, file);
      await other.close();
      expect(readElsewhere(file, 'SELECT id FROM rollouts')).toEqual([{ id: 'before' }]);
      expect(existsSync(`${file}-wal`)).toBe(true);
      await held.createRollout({ id: 'after', taskId: 't' });
      expect(readElsewhere(file, 'SELECT id FROM rollouts ORDER BY id')).toEqual([{ id: 'after' }, { id: 'before' }]);
    } finally {
      await held.close();
    }
  });
});
