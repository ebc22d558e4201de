import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';
import {
  ArtifactChecksumError,
  ArtifactNameError,
  ArtifactNotFoundError,
  type ArtifactStore,
} from './artifact-store.js';
import { FOLDER_MANIFEST, folderExists, putFolder, stageFolder } from './folders.js';
import { LocalArtifactStore } from './local-store.js';
import { parseS3Url, S3ArtifactStore } from './s3-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-artifacts-'));
let s3: TestS3;
let raw: S3Client;
beforeAll(async () => {
  s3 = await startTestS3();
  raw = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true });
});
afterAll(async () => {
  raw.destroy();
  await s3.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Each backend, and how to change an object behind the store's back (another writer, bit rot). */
interface Backend {
  open(): Promise<ArtifactStore>;
  overwrite(uri: string, bytes: Buffer): Promise<void>;
}
let stores = 0;
const backends: Record<string, Backend> = {
  local: {
    open: async () => new LocalArtifactStore(path.join(dir, `store-${stores++}`)),
    overwrite: async (uri, bytes) => writeFileSync(fileURLToPath(uri), bytes),
  },
  s3: {
    open: async () => new S3ArtifactStore(`s3://${await s3.bucket()}/some/prefix`, { endpoint: s3.endpoint }),
    overwrite: async (uri, bytes) => {
      const { bucket, prefix: key } = parseS3Url(uri);
      await raw.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes }));
    },
  },
};

describe.each(Object.entries(backends))('the ArtifactStore contract: %s', (_kind, backend) => {
  let store: ArtifactStore;
  beforeAll(async () => {
    store = await backend.open();
  });

  it('stores bytes under a name and reads them back by the URI it returned, with their sha256', async () => {
    const bytes = randomBytes(70_000);
    const stored = await store.put('runs/r1/iterations/1/batch.safetensors', bytes);
    expect(stored.uri).toBe(store.uriOf('runs/r1/iterations/1/batch.safetensors'));
    expect(stored.uri.startsWith(store.url)).toBe(true);
    expect(stored.bytes).toBe(bytes.length);
    expect((await store.get(stored.uri, stored)).equals(bytes)).toBe(true);
    expect(await store.exists(stored.uri)).toBe(true);
    const text = await store.put('runs/r1/iterations/1/report.json', '{"ok":true}\n');
    expect((await store.get(text.uri)).toString()).toBe('{"ok":true}\n');
  });

  it('lists by prefix, sorted, and deletes (deleting what is gone is fine)', async () => {
    for (const name of ['list/b/2', 'list/a/1', 'list/a/0', 'listed-elsewhere']) await store.put(name, name);
    expect(await store.list('list/a/')).toEqual([store.uriOf('list/a/0'), store.uriOf('list/a/1')]);
    expect(await store.list('list/')).toEqual(['list/a/0', 'list/a/1', 'list/b/2'].map((n) => store.uriOf(n)));
    expect(await store.list('nothing-here/')).toEqual([]);
    // With sizes and last writes, for rein gc.
    const entries = await store.listEntries('list/');
    expect(entries.map((e) => [e.uri, e.bytes])).toEqual(
      ['list/a/0', 'list/a/1', 'list/b/2'].map((n) => [store.uriOf(n), n.length]),
    );
    for (const e of entries) expect(Math.abs(e.modifiedAt - Date.now())).toBeLessThan(10 * 60_000);
    await store.delete(store.uriOf('list/a/0'));
    await store.delete(store.uriOf('list/a/0'));
    expect(await store.exists(store.uriOf('list/a/0'))).toBe(false);
    expect(await store.list('list/a/')).toEqual([store.uriOf('list/a/1')]);
  });

  it('answers a missing object with an error that names its URI', async () => {
    const uri = store.uriOf('never/written.json');
    const error = await store.get(uri).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ArtifactNotFoundError);
    expect((error as Error).message).toBe(`artifact ${uri} does not exist`);
    expect(await store.exists(uri)).toBe(false);
  });

  it('refuses an object that changed after it was written, naming the URI', async () => {
    const stored = await store.put('changed/batch.safetensors', 'the batch the iteration built');
    await backend.overwrite(stored.uri, Buffer.from('something else'));
    const error = await store.get(stored.uri, stored).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ArtifactChecksumError);
    expect((error as Error).message).toContain(`artifact ${stored.uri} changed after it was written`);
    expect((error as Error).message).toContain(stored.sha256);
  });

  it('refuses names that escape the store, and URIs of other stores', async () => {
    for (const name of ['../outside', 'a/../../outside', '/etc/passwd', '', '.', 'a\\b', 'nul\0byte']) {
      await expect(store.put(name, 'x'), name).rejects.toThrow(ArtifactNameError);
      expect(() => store.uriOf(name), name).toThrow(/is not a relative path inside the artifact store/);
    }
    const outside = store.url.startsWith('s3://')
      ? ['s3://another-bucket/some/prefix/x', store.url.replace(/\/prefix$/, '/other/x')]
      : ['file:///etc/passwd', `${store.url}/../x`];
    for (const uri of outside) {
      const error = await store.get(uri).catch((e: unknown) => e);
      expect(error, uri).toBeInstanceOf(ArtifactNameError);
      expect((error as Error).message).toContain(
        `is outside the artifact store ${store.url.startsWith('s3://') ? store.url : fileURLToPath(store.url)}`,
      );
    }
    await expect(store.get('https://example.com/x')).rejects.toThrow(ArtifactNameError);
  });

  it('is atomic: while an object is rewritten, every read is one whole version, never a mix or a part', async () => {
    const [a, b] = [Buffer.alloc(2_000_000, 1), Buffer.alloc(2_000_000, 2)];
    const first = await store.put('atomic/checkpoint.bin', a);
    const versions = new Map([[first.sha256, a]]);
    const writing = (async () => {
      for (let i = 0; i < 6; i++) {
        const next = i % 2 === 0 ? b : a;
        versions.set((await store.put('atomic/checkpoint.bin', next)).sha256, next);
      }
    })();
    let done = false;
    void writing.finally(() => (done = true));
    let reads = 0;
    while (!done || reads < 3) {
      const read = await store.get(first.uri);
      expect(read.equals(a) || read.equals(b)).toBe(true);
      reads++;
    }
    await writing;
    expect(await store.list('atomic/')).toEqual([first.uri]);
  });

  it('keeps folders (checkpoints, adapters) whole: staged copies are checked, unfinished folders are never read', async () => {
    const source = path.join(dir, `checkpoint-${stores++}`);
    mkdirSync(path.join(source, 'sub'), { recursive: true });
    writeFileSync(path.join(source, 'config.json'), '{"model":"tiny"}');
    writeFileSync(path.join(source, 'sub', 'model.safetensors'), randomBytes(10_000));
    const uri = await putFolder(store, 'policies/run-1/v1', source);
    expect(await folderExists(store, uri)).toBe(true);
    const cache = path.join(dir, `staging-${stores++}`);
    const staged = await stageFolder(store, uri, cache);
    expect(
      readFileSync(path.join(staged, 'sub', 'model.safetensors')).equals(
        readFileSync(path.join(source, 'sub', 'model.safetensors')),
      ),
    ).toBe(true);
    expect(await stageFolder(store, uri, cache)).toBe(staged);

    // A writer that died before its manifest left an unfinished folder.
    await store.put('policies/run-1/v2/config.json', '{}');
    expect(await folderExists(store, store.uriOf('policies/run-1/v2'))).toBe(false);
    await expect(stageFolder(store, store.uriOf('policies/run-1/v2'), cache)).rejects.toThrow(
      `${store.uriOf('policies/run-1/v2')} (a folder: no ${FOLDER_MANIFEST}, so it was never written whole) does not exist`,
    );

    // A file changed after the upload: the stage fails naming it, and leaves no partial copy.
    await backend.overwrite(store.uriOf('policies/run-1/v1/sub/model.safetensors'), Buffer.from('tampered'));
    rmSync(staged, { recursive: true });
    await expect(stageFolder(store, uri, cache)).rejects.toThrow(
      `artifact ${store.uriOf('policies/run-1/v1/sub/model.safetensors')} changed after it was written`,
    );
    expect(readdirSync(cache)).toEqual([]);
  });
});

describe('S3ArtifactStore settings', () => {
  it('refuses an artifacts URL that is not s3://bucket/prefix, saying the form', () => {
    for (const url of ['s3://', 'https://bucket/x', 's3://Bad_Bucket/x'])
      expect(() => new S3ArtifactStore(url), url).toThrow('write s3://bucket/optional/prefix');
  });

  it('checks the sha256 recorded with the object even when the reader does not know it', async () => {
    const store = new S3ArtifactStore(`s3://${await s3.bucket()}`, { endpoint: s3.endpoint });
    const stored = await store.put('report.json', '{}');
    expect(stored.uri).toMatch(/^s3:\/\/rein-[^/]+\/report\.json$/);
    const { bucket, prefix: key } = parseS3Url(stored.uri);
    await raw.send(
      new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'bit rot', Metadata: { sha256: stored.sha256 } }),
    );
    await expect(store.get(stored.uri)).rejects.toThrow(`artifact ${stored.uri} changed after it was written`);
  });
});
