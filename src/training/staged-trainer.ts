import path from 'node:path';
import { ArtifactNameError, type ArtifactStore } from '../artifacts/artifact-store.js';
import {
  folderExists,
  getFolderFile,
  isLocalReference,
  localPath,
  putFolder,
  stageFile,
  stageFolder,
} from '../artifacts/folders.js';
import type { TrainResult } from '../policy/local-trainer.js';
import { readBatch } from '../policy/trainer-input.js';
import { PolicyLineageError, PolicySetupError, PolicyUpdateError } from './errors.js';
import type { PolicyTrainer } from './policy-update.js';

/**
 * A trainer whose inputs and outputs may live in an artifact store (s3://). Trainers read and
 * write local folders, so the worker stages what they read — the batch and the parent checkpoint
 * — into `stagingDir`, lets the trainer write its usual local output folder, and, when the store
 * is remote, uploads that folder as `policies/<run>/<version>`: the URI the registry records and
 * the serving side loads. The trainers themselves (tfjs and PyTorch, whose pinned environment has
 * no S3 client) never see an s3:// URI. A version already uploaded whole is not trained again.
 * A trainer that reads the store itself (a Kubernetes Job whose pod pulls and pushes) gets the
 * URIs and the output's URI instead, and the worker stages nothing.
 */
export function stagedPolicyTrainer(
  trainer: PolicyTrainer,
  options: { artifacts: ArtifactStore; stagingDir: string; policiesDir: string },
): PolicyTrainer {
  const { artifacts, stagingDir, policiesDir } = options;
  const remote = !isLocalReference(artifacts.url);
  // A URI of another store (a worker configured apart from the one that wrote it) cannot be fixed by a retry.
  const staged = async (what: string, uri: string, stage: () => Promise<string>) => {
    try {
      return await stage();
    } catch (err) {
      if (!(err instanceof ArtifactNameError)) throw err;
      throw new PolicySetupError(
        `the ${what} ${uri} is not in this worker's artifact store (${artifacts.url}): give every worker and policy server the artifacts.url that wrote it`,
      );
    }
  };
  return {
    async train(input) {
      const stageBatch = () =>
        staged('batch', input.batchPath, () => stageFile(artifacts, input.batchPath, path.join(stagingDir, 'batches')));
      if (remote && trainer.readsArtifactStore) {
        const uri = artifacts.uriOf(outputName(input.outputDir));
        const previous = await uploaded(uri, stageBatch);
        if (previous) return previous;
        const result = await trainer.train({ ...input, outputUri: uri });
        if (!(await folderExists(artifacts, uri)))
          throw new PolicyUpdateError(
            `the trainer finished but its output is not at ${uri}: the push after training did not complete`,
          );
        return { ...result, checkpointUri: uri };
      }
      const batchPath = isLocalReference(input.batchPath) ? localPath(input.batchPath) : await stageBatch();
      const parentCheckpoint = isLocalReference(input.parentCheckpoint)
        ? localPath(input.parentCheckpoint)
        : await staged('parent checkpoint', input.parentCheckpoint, () =>
            stageFolder(artifacts, input.parentCheckpoint, path.join(stagingDir, 'checkpoints')),
          );
      if (!remote) return trainer.train({ ...input, batchPath, parentCheckpoint });

      const name = outputName(input.outputDir);
      const uri = artifacts.uriOf(name);
      const previous = await uploaded(uri, async () => batchPath);
      if (previous) return previous;
      const result = await trainer.train({ ...input, batchPath, parentCheckpoint });
      await putFolder(artifacts, name, input.outputDir);
      return { ...result, checkpointUri: uri };
    },
  };

  /** The store's name for a version's output folder: `policies/<run>/<version>`, as under policiesDir. */
  function outputName(outputDir: string): string {
    return ['policies', ...path.relative(policiesDir, outputDir).split(path.sep)].join('/');
  }

  /** A retry (maybe on another worker) after the upload: the stored result, when it is this batch's. */
  async function uploaded(uri: string, localBatch: () => Promise<string>): Promise<TrainResult | undefined> {
    if (!(await folderExists(artifacts, uri))) return undefined;
    const previous = JSON.parse((await getFolderFile(artifacts, uri, 'metrics.json')).toString('utf8')) as TrainResult;
    const batchContentHash = readBatch(await localBatch()).metadata.content_hash;
    if (previous.batchContentHash !== batchContentHash) {
      throw new PolicyLineageError(
        `${uri} already holds a checkpoint trained from batch ${previous.batchContentHash}, not ${batchContentHash}; choose a new version name`,
      );
    }
    return { ...previous, reused: true, checkpointUri: uri };
  }
}
