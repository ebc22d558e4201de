import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { reinInProcess } from '../../../test/helpers/cli-in-process.js';

/**
 * `rein artifacts push|pull`, as a training pod runs them with no config file: the store comes
 * from REIN_ARTIFACTS_URL (S3: kubernetes-trainer.test.ts runs them as the pod's containers) or,
 * here, the data directory's folder. In this process: the CLI's own entry point, without a
 * child process's start-up per command.
 */
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-artifacts-cli-'));
process.env.REIN_DATA_DIR = path.join(dir, 'data');
delete process.env.REIN_CONFIG;
delete process.env.REIN_ARTIFACTS_URL;
const store = pathToFileURL(path.join(dir, 'data', 'artifacts')).href;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rein = reinInProcess;

describe('rein artifacts push and pull', () => {
  it('pushes a folder and pulls it back whole, and pulls a single artifact to a file', async () => {
    const checkpoint = path.join(dir, 'checkpoint');
    mkdirSync(path.join(checkpoint, 'tokenizer'), { recursive: true });
    writeFileSync(path.join(checkpoint, 'model.safetensors'), 'weights');
    writeFileSync(path.join(checkpoint, 'tokenizer', 'tokenizer.json'), '{}');
    const pushed = await rein('artifacts', 'push', checkpoint, `${store}/policies/run/v1`);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(JSON.parse(pushed.stdout)).toEqual({
      pushed: checkpoint,
      to: `${store}/policies/run/v1`,
      files: 2,
      bytes: 9,
    });

    const pulled = await rein('artifacts', 'pull', `${store}/policies/run/v1`, path.join(dir, 'copy'));
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(readFileSync(path.join(dir, 'copy', 'tokenizer', 'tokenizer.json'), 'utf8')).toBe('{}');
    expect(JSON.parse(pulled.stdout)).toMatchObject({ folder: true, files: 3 }); // with the folder's manifest

    const file = await rein(
      'artifacts',
      'pull',
      `${store}/policies/run/v1/model.safetensors`,
      path.join(dir, 'one', 'model.safetensors'),
    );
    expect(file.code, file.stderr).toBe(0);
    expect(readFileSync(path.join(dir, 'one', 'model.safetensors'), 'utf8')).toBe('weights');
  });

  it('refuses with exit 2 (a retry would fail the same way) what is not there, a URI of another store, and a missing folder', async () => {
    const absent = await rein('artifacts', 'pull', `${store}/runs/r/batch.safetensors`, path.join(dir, 'b'));
    expect(absent.code).toBe(2);
    expect(absent.stderr).toContain(`artifact ${store}/runs/r/batch.safetensors does not exist`);

    const elsewhere = await rein(
      'artifacts',
      'pull',
      's3://another-bucket/runs/r/batch.safetensors',
      path.join(dir, 'b'),
    );
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toContain(
      `s3://another-bucket/runs/r/batch.safetensors is not in the artifact store ${store}: give every service the same artifacts.url`,
    );

    const nothing = await rein('artifacts', 'push', path.join(dir, 'never-written'), `${store}/policies/run/v2`);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('is not a folder: the trainer wrote no output there');
  });
});
