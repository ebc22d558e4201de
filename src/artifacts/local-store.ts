import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  ArtifactNameError,
  ArtifactNotFoundError,
  checkedName,
  type ArtifactEntry,
  type ArtifactStore,
  type StoredArtifact,
} from './artifact-store.js';
import { sha256Of, verified } from './checksum.js';

export type { StoredArtifact } from './artifact-store.js';

/** A write in progress (see put): never listed. */
const TEMPORARY = /\.[0-9a-f-]{36}\.tmp$/;

const isMissing = (err: unknown) =>
  (err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR';

/**
 * Artifacts (batches, reports, policies) in a local folder: the embedded default. Writes are
 * atomic (temporary file, then rename), so a crashed writer never leaves half an artifact under
 * its final name, and rewriting the same name with the same bytes is harmless.
 */
export class LocalArtifactStore implements ArtifactStore {
  private readonly root: string;
  readonly url: string;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.url = pathToFileURL(this.root).href;
  }

  uriOf(name: string): string {
    return pathToFileURL(path.join(this.root, checkedName(name))).href;
  }

  async put(name: string, bytes: Buffer | string): Promise<StoredArtifact> {
    const file = path.join(this.root, checkedName(name));
    await mkdir(path.dirname(file), { recursive: true });
    const tmp = `${file}.${randomUUID()}.tmp`;
    await writeFile(tmp, bytes, { flush: true });
    await rename(tmp, file);
    const data = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    return { uri: pathToFileURL(file).href, sha256: sha256Of(data), bytes: data.length };
  }

  async get(uri: string, expected?: { sha256: string }): Promise<Buffer> {
    try {
      return verified(uri, await readFile(this.fileOf(uri)), expected?.sha256);
    } catch (err) {
      if (isMissing(err)) throw new ArtifactNotFoundError(uri);
      throw err;
    }
  }

  async exists(uri: string): Promise<boolean> {
    return stat(this.fileOf(uri)).then(
      (s) => s.isFile(),
      (err: unknown) => {
        if (isMissing(err)) return false;
        throw err;
      },
    );
  }

  async delete(uri: string): Promise<void> {
    await rm(this.fileOf(uri), { force: true });
  }

  async list(prefix: string): Promise<string[]> {
    return (await this.names(prefix)).map((name) => this.uriOf(name));
  }

  async listEntries(prefix: string): Promise<ArtifactEntry[]> {
    const entries: ArtifactEntry[] = [];
    for (const name of await this.names(prefix)) {
      // Gone since the listing (deleted by another process): not listed.
      const stats = await stat(path.join(this.root, name)).catch((err: unknown) =>
        isMissing(err) ? undefined : Promise.reject(err),
      );
      if (stats) entries.push({ uri: this.uriOf(name), bytes: stats.size, modifiedAt: stats.mtimeMs });
    }
    return entries;
  }

  /** The names of the files under a prefix, sorted. */
  private async names(prefix: string): Promise<string[]> {
    // A prefix is a folder ("runs/r1/") or the start of names in one ("runs/r1/iter").
    const start = prefix === '' ? '' : checkedName(prefix) + (prefix.endsWith('/') ? '/' : '');
    const dir = path.join(this.root, start.endsWith('/') || start === '' ? start : path.dirname(start));
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch((err: unknown) => {
      if (isMissing(err)) return [];
      throw err;
    });
    return entries
      .filter((e) => e.isFile() && !TEMPORARY.test(e.name))
      .map((e) => path.relative(this.root, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
      .filter((name) => name.startsWith(start))
      .sort();
  }

  private fileOf(uri: string): string {
    if (!uri.startsWith('file:'))
      throw new ArtifactNameError(`artifact ${uri} is not a file:// URI of the artifact store ${this.url}`);
    const file = fileURLToPath(uri);
    const rel = path.relative(this.root, file);
    if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel))
      throw new ArtifactNameError(`artifact ${uri} is outside the artifact store ${this.root}`);
    return file;
  }
}
