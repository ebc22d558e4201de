import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface StoredArtifact {
  uri: string;
  sha256: string;
  bytes: number;
}

/**
 * Artifacts (batches, reports, policies) in a local folder: the embedded default. Writes are
 * atomic (temporary file, then rename), so a crashed writer never leaves half an artifact under
 * its final name, and rewriting the same name with the same bytes is harmless.
 */
export class LocalArtifactStore {
  constructor(private readonly root: string) {}

  put(name: string, bytes: Buffer | string): StoredArtifact {
    const file = this.pathOf(name);
    mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${randomUUID()}.tmp`;
    writeFileSync(tmp, bytes, { flush: true });
    renameSync(tmp, file);
    const data = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    return { uri: pathToFileURL(file).href, sha256: createHash('sha256').update(data).digest('hex'), bytes: data.length };
  }

  get(uri: string): Buffer {
    const file = fileURLToPath(uri);
    if (path.relative(this.root, file).startsWith('..')) throw new Error(`artifact ${uri} is outside the artifact store ${this.root}`);
    return readFileSync(file);
  }

  private pathOf(name: string): string {
    const file = path.resolve(this.root, name);
    if (path.relative(this.root, file).startsWith('..')) throw new Error(`artifact name ${name} escapes the artifact store`);
    return file;
  }
}
