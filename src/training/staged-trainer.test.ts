import { mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestS3, type TestS3 } from '../../test/helpers/s3.js';
import { writeTinyPolicyAndBatch } from '../../test/helpers/tiny-policy.js';
import { folderExists, isLocalReference, putFolder } from '../artifacts/folders.js';
import { LocalArtifactStore } from '../artifacts/local-store.js';
import { S3ArtifactStore } from '../artifacts/s3-store.js';
import { runTrainJob } from '../policy/local-trainer.js';
import { startPolicyServer } from '../policy/server.js';
import { PolicyLineageError, PolicySetupError } from './errors.js';
import type { PolicyTrainer, TrainInput } from './policy-update.js';
import { stagedPolicyTrainer } from './staged-trainer.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-staged-trainer-'));
let s3: TestS3;
let artifacts: S3ArtifactStore;
let tiny: { base: string; batch: string; shifted: Record<'other', string> };
beforeAll(async () => {
  [s3, tiny] = await Promise.all([startTestS3(), writeTinyPolicyAndBatch(dir, { other: 1 })]);
  artifacts = new S3ArtifactStore(`s3://${await s3.bucket()}/rein`, { endpoint: s3.endpoint });
});
afterAll(async () => {
  artifacts.close();
  await s3.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The tfjs trainer in this process, recording what it was given. */
function recordingTrainer(): PolicyTrainer & { inputs: TrainInput[] } {
  const inputs: TrainInput[] = [];
  return {
    inputs,
    train: async (input) => {
      inputs.push(input);
      return runTrainJob({
        checkpointDir: input.parentCheckpoint,
        batchPath: input.batchPath,
        outputDir: input.outputDir,
        seed: 3,
        learningRate: 0.01,
        epochs: 1,
        minibatchSize: 32,
        clipEpsilon: 0.2,
        maxGradNorm: 1,
      });
    },
  };
}

/** A worker's view: its own staging folder and policies folder, the shared bucket. */
const worker = (name: string, trainer: PolicyTrainer) =>
  stagedPolicyTrainer(trainer, {
    artifacts,
    stagingDir: path.join(dir, name, 'staging'),
    policiesDir: path.join(dir, name, 'policies'),
  });

describe('a policy update whose batch, parent and output are in S3', () => {
  it('stages s3:// inputs for the trainer, uploads its output, and never trains an uploaded version twice', async () => {
    const batch = await artifacts.put('runs/r1/iterations/1/batch.safetensors', await readFile(tiny.batch));
    const parent = await putFolder(artifacts, 'policies/base', tiny.base);
    const first = recordingTrainer();
    const result = await worker('w1', first).train({
      parentCheckpoint: parent,
      batchPath: batch.uri,
      outputDir: path.join(dir, 'w1', 'policies', 'r1', 'r1.v1'),
    });
    expect(result).toMatchObject({ reused: false, checkpointUri: `${artifacts.url}/policies/r1/r1.v1` });
    expect(await folderExists(artifacts, result.checkpointUri as string)).toBe(true);
    // The trainer itself only ever saw local paths.
    expect(first.inputs).toHaveLength(1);
    expect(isLocalReference(first.inputs[0]!.batchPath) && isLocalReference(first.inputs[0]!.parentCheckpoint)).toBe(
      true,
    );

    // A retry on another worker (its own disk) finds the upload: nothing trains.
    const second = recordingTrainer();
    const again = await worker('w2', second).train({
      parentCheckpoint: parent,
      batchPath: batch.uri,
      outputDir: path.join(dir, 'w2', 'policies', 'r1', 'r1.v1'),
    });
    expect(again).toMatchObject({
      reused: true,
      checkpointUri: result.checkpointUri,
      batchContentHash: result.batchContentHash,
    });
    expect(second.inputs).toHaveLength(0);

    // The same version name with another batch is refused, naming where the other result is.
    const other = await artifacts.put('runs/r1/iterations/1/other.safetensors', await readFile(tiny.shifted.other));
    const refused = await worker('w3', recordingTrainer())
      .train({
        parentCheckpoint: parent,
        batchPath: other.uri,
        outputDir: path.join(dir, 'w3', 'policies', 'r1', 'r1.v1'),
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PolicyLineageError);
    expect((refused as Error).message).toContain(
      `${result.checkpointUri} already holds a checkpoint trained from batch ${result.batchContentHash}`,
    );
  });

  it("refuses for good, saying what to configure, inputs outside the worker's artifact store", async () => {
    const parent = await putFolder(artifacts, 'policies/elsewhere', tiny.base);
    const local = stagedPolicyTrainer(recordingTrainer(), {
      artifacts: new LocalArtifactStore(path.join(dir, 'w4', 'artifacts')),
      stagingDir: path.join(dir, 'w4', 'staging'),
      policiesDir: path.join(dir, 'w4', 'policies'),
    });
    const refused = await local
      .train({
        parentCheckpoint: parent,
        batchPath: tiny.batch,
        outputDir: path.join(dir, 'w4', 'policies', 'r2', 'r2.v1'),
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PolicySetupError);
    expect((refused as Error).message).toBe(
      `the parent checkpoint ${parent} is not in this worker's artifact store (${pathToFileURL(path.join(dir, 'w4', 'artifacts')).href}): give every worker and policy server the artifacts.url that wrote it`,
    );
  });

  it('the embedded policy server loads an s3:// checkpoint by staging it, and without an artifact store says what to set', async () => {
    const uri = await putFolder(artifacts, 'policies/served', tiny.base);
    const load = (url: string) =>
      fetch(`${url.replace(/\/v1$/, '')}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: 'from-s3', lora_path: uri }),
      });
    const withStore = await startPolicyServer({
      host: '127.0.0.1',
      port: 0,
      adminKey: 'k',
      artifacts: { store: artifacts, stagingDir: path.join(dir, 'server-staging') },
    });
    const without = await startPolicyServer({ host: '127.0.0.1', port: 0, adminKey: 'k' });
    try {
      expect((await load(withStore.url)).status).toBe(200);
      expect(withStore.models()).toEqual(['from-s3']);
      const refused = await load(without.url);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toBe(
        `${uri} is not a local folder, and this policy server has no artifact store to read it from: set artifacts.url (and artifacts.s3) in its config`,
      );
    } finally {
      await withStore.close();
      await without.close();
    }
  });
});
