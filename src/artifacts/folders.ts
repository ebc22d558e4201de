import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArtifactNotFoundError, type ArtifactStore } from './artifact-store.js';

/**
 * Folders (checkpoints, LoRA adapters) in an artifact store: every file under the folder's name,
 * then a manifest of their sha256s, written last. A folder without its manifest is unfinished
 * (its writer died midway) and is never read; a staged copy is checked file by file.
 */
export const FOLDER_MANIFEST = 'rein-folder.json';

interface FolderManifest {
  files: Record<string, string>;
}

/** Local paths and file:// URIs are read in place; s3:// (or any other store's URI) is staged. */
export const isLocalReference = (ref: string): boolean =>
  !/^[a-z][a-z0-9+.-]*:\/\//i.test(ref) || ref.startsWith('file://');

/** A file:// URI or a path → the path. */
export function localPath(ref: string): string {
  return ref.startsWith('file://') ? fileURLToPath(ref) : ref;
}

/**
 * Uploads a local folder under `name`; returns the folder's URI. Rewriting a folder with the same files is harmless.
 */
export async function putFolder(store: ArtifactStore, name: string, dir: string): Promise<string> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files: Record<string, string> = {};
  for (const entry of entries.filter((e) => e.isFile()).sort((a, b) => a.name.localeCompare(b.name))) {
    const rel = path.relative(dir, path.join(entry.parentPath, entry.name)).split(path.sep).join('/');
    if (rel === FOLDER_MANIFEST) continue;
    files[rel] = (await store.put(`${name}/${rel}`, await readFile(path.join(dir, rel)))).sha256;
  }
  await store.put(`${name}/${FOLDER_MANIFEST}`, `${JSON.stringify({ files } satisfies FolderManifest, null, 2)}\n`);
  return folderUri(store, name);
}

/** A folder's URI: its name's URI, which the files sit under. */
export const folderUri = (store: ArtifactStore, name: string): string => store.uriOf(name);

/** True when the folder at the URI was written whole (its manifest is there). */
export async function folderExists(store: ArtifactStore, uri: string): Promise<boolean> {
  return store.exists(`${uri.replace(/\/+$/, '')}/${FOLDER_MANIFEST}`);
}

/** One file of a finished folder, checked against the folder's manifest. */
export async function getFolderFile(store: ArtifactStore, uri: string, rel: string): Promise<Buffer> {
  const base = uri.replace(/\/+$/, '');
  const manifest = await readManifest(store, base);
  const sha256 = manifest.files[rel];
  if (sha256 === undefined) throw new ArtifactNotFoundError(`${base}/${rel}`);
  return store.get(`${base}/${rel}`, { sha256 });
}

/**
 * One file of a checkpoint wherever the registry says it is: a local folder (read in place) or a folder in the
 * artifact store (checked against its manifest). ArtifactNotFoundError when the folder has no such file.
 */
export async function readCheckpointFile(store: ArtifactStore, ref: string, rel: string): Promise<Buffer> {
  if (!isLocalReference(ref)) return getFolderFile(store, ref, rel);
  const file = path.join(localPath(ref), ...rel.split('/'));
  try {
    return await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ArtifactNotFoundError(file);
    throw err;
  }
}

async function readManifest(store: ArtifactStore, base: string): Promise<FolderManifest> {
  try {
    return JSON.parse((await store.get(`${base}/${FOLDER_MANIFEST}`)).toString('utf8')) as FolderManifest;
  } catch (err) {
    if (err instanceof ArtifactNotFoundError)
      throw new ArtifactNotFoundError(`${base} (a folder: no ${FOLDER_MANIFEST}, so it was never written whole)`);
    throw err;
  }
}

/**
 * A local copy of the folder at the URI, under `cacheDir` (one per URI, reused while its
 * manifest is unchanged): for readers that want a path, like the trainer and the policy server.
 */
export async function stageFolder(store: ArtifactStore, uri: string, cacheDir: string): Promise<string> {
  const base = uri.replace(/\/+$/, '');
  const manifest = await readManifest(store, base);
  const dir = path.join(cacheDir, createHash('sha256').update(base).digest('hex').slice(0, 16));
  const copied = path.join(dir, FOLDER_MANIFEST);
  if (existsSync(copied) && (await readFile(copied, 'utf8')) === manifestText(manifest)) return dir;
  await copyFolder(store, base, manifest, dir);
  return dir;
}

/** The folder at the URI, downloaded to `dir` (replacing what is there), each file checked against its manifest. */
export async function downloadFolder(store: ArtifactStore, uri: string, dir: string): Promise<void> {
  const base = uri.replace(/\/+$/, '');
  await copyFolder(store, base, await readManifest(store, base), dir);
}

const manifestText = (manifest: FolderManifest) => `${JSON.stringify(manifest, null, 2)}\n`;

/** Downloaded into a temporary folder beside `dir` and renamed, so a copy is whole or absent. */
async function copyFolder(store: ArtifactStore, base: string, manifest: FolderManifest, dir: string): Promise<void> {
  const tmp = `${dir}.${randomUUID()}.tmp`;
  try {
    for (const [rel, sha256] of Object.entries(manifest.files)) {
      const file = path.join(tmp, ...rel.split('/'));
      await mkdir(path.dirname(file), { recursive: true });
      await writeFile(file, await store.get(`${base}/${rel}`, { sha256 }));
    }
    await writeFile(path.join(tmp, FOLDER_MANIFEST), manifestText(manifest));
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** A local copy of one artifact (a batch), verified when its sha256 is known. */
export async function stageFile(
  store: ArtifactStore,
  uri: string,
  cacheDir: string,
  expected?: { sha256: string },
): Promise<string> {
  const file = path.join(
    cacheDir,
    `${createHash('sha256').update(uri).digest('hex').slice(0, 16)}-${path.posix.basename(uri)}`,
  );
  await mkdir(cacheDir, { recursive: true });
  const tmp = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(tmp, await store.get(uri, expected));
    await rename(tmp, file);
  } finally {
    await rm(tmp, { force: true });
  }
  return file;
}
