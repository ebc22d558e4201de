import type { ArtifactStore } from '../artifacts/artifact-store.js';
import { isLocalReference, localPath, stageFolder } from '../artifacts/folders.js';
import { loadCheckpoint, type Checkpoint } from './checkpoint.js';
import { HttpError } from './policy-http.js';
import type { GenerationScheduler } from './scheduler.js';

/** Where s3:// checkpoints are read from, and the local folder they are staged into (the model code reads files). */
export interface ArtifactSource {
  store: ArtifactStore;
  stagingDir: string;
}

/** The policy versions a policy server serves, by name, loaded and unloaded at runtime. */
export class ServedModels {
  private readonly models = new Map<string, Checkpoint>();

  constructor(
    private readonly scheduler: GenerationScheduler,
    private readonly artifacts: ArtifactSource | undefined,
  ) {}

  names(): string[] {
    return [...this.models.keys()];
  }

  entries(): Array<[string, Checkpoint]> {
    return [...this.models.entries()];
  }

  /** The checkpoint served under the name; vLLM's 404 when there is none. */
  get(name: string): Checkpoint {
    const checkpoint = this.models.get(name);
    if (!checkpoint) throw new HttpError(404, 'NotFoundError', `The model \`${name}\` does not exist.`);
    return checkpoint;
  }

  load(name: string, dir: string): void {
    if (this.models.has(name))
      throw new HttpError(400, 'BadRequestError', `model ${name} is already loaded; unload it first`);
    this.models.set(name, loadCheckpoint(dir));
  }

  /** Loads a checkpoint by path or URI: one in the artifact store (s3://) is staged to a local folder first. */
  async loadFrom(name: string, ref: string): Promise<void> {
    if (this.models.has(name))
      throw new HttpError(400, 'BadRequestError', `model ${name} is already loaded; unload it first`);
    this.load(name, await this.localFolder(ref));
  }

  /** New requests no longer find the version; those generating with it finish first, then its weights go. */
  unload(name: string): void {
    const checkpoint = this.get(name);
    this.models.delete(name);
    void this.scheduler.idle(checkpoint).then(() => checkpoint.model.dispose());
  }

  /** Frees every version's weights at once (the server has closed: nothing is generating). */
  disposeAll(): void {
    for (const c of this.models.values()) c.model.dispose();
    this.models.clear();
  }

  private async localFolder(ref: string): Promise<string> {
    if (isLocalReference(ref)) return localPath(ref);
    if (!this.artifacts)
      throw new HttpError(
        400,
        'BadRequestError',
        `${ref} is not a local folder, and this policy server has no artifact store to read it from: set artifacts.url (and artifacts.s3) in its config`,
      );
    return stageFolder(this.artifacts.store, ref, this.artifacts.stagingDir);
  }
}
