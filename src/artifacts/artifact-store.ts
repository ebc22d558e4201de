/** What a store answers for an artifact it wrote: where it is, and what its bytes hash to. */
export interface StoredArtifact {
  uri: string;
  sha256: string;
  bytes: number;
}

/**
 * Where Rein keeps its artifacts (batches, reports, checkpoints, adapters): a local folder or a
 * bucket of S3-compatible object storage. Names are relative (`runs/r1/iterations/2/batch.safetensors`);
 * URIs are what a store hands out (`file://…`, `s3://bucket/prefix/…`) and what other services
 * read back. Writes are atomic: a reader sees the whole object or none.
 */
export interface ArtifactStore {
  /** The store's own URI (file:///…/artifacts, s3://bucket/prefix): where names resolve. */
  readonly url: string;
  /** The URI a name resolves to (no I/O); a name that escapes the store is refused. */
  uriOf(name: string): string;
  put(name: string, bytes: Buffer | string): Promise<StoredArtifact>;
  /**
   * The bytes at a URI of this store. Given the sha256 the write returned, bytes that hash to
   * anything else are an ArtifactChecksumError naming the URI (the object changed after it was written).
   */
  get(uri: string, expected?: { sha256: string }): Promise<Buffer>;
  exists(uri: string): Promise<boolean>;
  /** Deletes one object; deleting what is not there is fine. */
  delete(uri: string): Promise<void>;
  /** The URIs of every object under a name prefix ("runs/r1/"), sorted. */
  list(prefix: string): Promise<string[]>;
  /** The same objects with their sizes and last writes, for what measures or ages them (rein gc). */
  listEntries(prefix: string): Promise<ArtifactEntry[]>;
}

/** An object as a listing gives it: its URI, its size and when it was last written (ms since the epoch). */
export interface ArtifactEntry {
  uri: string;
  bytes: number;
  modifiedAt: number;
}

export class ArtifactNotFoundError extends Error {
  override name = 'ArtifactNotFoundError';
  constructor(readonly uri: string) {
    super(`artifact ${uri} does not exist`);
  }
}

export class ArtifactChecksumError extends Error {
  override name = 'ArtifactChecksumError';
  constructor(
    readonly uri: string,
    expected: string,
    actual: string,
  ) {
    super(`artifact ${uri} changed after it was written: its sha256 is ${actual}, the writer recorded ${expected}`);
  }
}

/** A name or URI the store refuses (escapes it, is empty, belongs to another store). */
export class ArtifactNameError extends Error {
  override name = 'ArtifactNameError';
}

/** A relative artifact name, normalised; one that is empty, absolute or climbs out (`..`) is refused. */
export function checkedName(name: string): string {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (
    name.startsWith('/') ||
    name.includes('\\') ||
    name.includes('\0') ||
    parts.length === 0 ||
    parts.includes('..')
  ) {
    throw new ArtifactNameError(
      `artifact name ${JSON.stringify(name)} is not a relative path inside the artifact store (no leading /, no .., no backslashes)`,
    );
  }
  return parts.join('/');
}

/** The name a URI of this store has (the inverse of uriOf); a URI of another store is refused, naming both. */
export function nameInStore(store: Pick<ArtifactStore, 'url'>, uri: string): string {
  const prefix = `${store.url.replace(/\/+$/, '')}/`;
  if (!uri.startsWith(prefix))
    throw new ArtifactNameError(
      `${uri} is not in the artifact store ${store.url}: give every service the same artifacts.url`,
    );
  const rest = uri.slice(prefix.length);
  return checkedName(store.url.startsWith('file://') ? decodeURIComponent(rest) : rest);
}
