import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runRein } from '../../test/helpers/cli.js';
import { withLedger } from '../ledger/open.js';
import { withRegistry } from '../registry/open.js';
import { registryFile } from '../registry/registry-store.js';
import { SqliteTraceStore } from './sqlite-store.js';

// Traces hold prompts and completions, the registry and ledgers what was trained and released:
// Rein creates them for its user alone (folders 0700, files 0600), whatever the umask says.

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-modes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const mode = (file: string) => statSync(file).mode & 0o777;
const sqliteFiles = (file: string) => [file, `${file}-wal`, `${file}-shm`].filter((f) => existsSync(f));

describe("Rein's data files", () => {
  it('the trace store and the folders it creates are private', async () => {
    const file = path.join(scratch, 'traces', 'deeper', 'traces.sqlite');
    const store = new SqliteTraceStore(file);
    await store.createRollout({ id: 'r1', taskId: 't1' });
    expect(sqliteFiles(file)).toHaveLength(3);
    for (const f of sqliteFiles(file)) expect(mode(f), f).toBe(0o600);
    expect(mode(path.join(scratch, 'traces'))).toBe(0o700);
    expect(mode(path.dirname(file))).toBe(0o700);
    await store.close();
  });

  it('the data directory, the registry and the ledgers are private', async () => {
    const dataDir = path.join(scratch, 'data', '.rein');
    await withRegistry({ dataDir, postgresUrl: null }, async (r) => {
      await r.register({
        version: 'v1',
        parent: null,
        runId: null,
        iteration: null,
        checkpointUri: '/ckpt',
        batchContentHash: null,
        trainerMetrics: {},
      });
      for (const f of sqliteFiles(registryFile(dataDir))) expect(mode(f), f).toBe(0o600);
    });
    await withLedger({ dataDir, postgresUrl: null }, (l) => l.list({}));
    expect(mode(path.join(scratch, 'data'))).toBe(0o700);
    expect(mode(dataDir)).toBe(0o700);
    expect(mode(registryFile(dataDir))).toBe(0o600);
  });

  it('the CLI creates them private too', async () => {
    const dir = mkdtempSync(path.join(scratch, 'cli-'));
    writeFileSync(path.join(dir, 'rein.yaml'), 'dataDir: state/.rein\n');
    const result = await runRein(['register', 'v1', '--checkpoint', '/ckpt'], {
      cwd: dir,
      env: { REIN_CONFIG: undefined },
    });
    expect(result).toMatchObject({ code: 0 });
    expect(mode(path.join(dir, 'state'))).toBe(0o700);
    for (const f of sqliteFiles(path.join(dir, 'state/.rein/registry.sqlite'))) expect(mode(f), f).toBe(0o600);
  });
});
