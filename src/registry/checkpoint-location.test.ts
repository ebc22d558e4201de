import { cpSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayControlClient } from '../gateway/control-client.js';
import { packageRoot } from '../package-root.js';
import { loadCheckpoint } from '../policy/checkpoint.js';
import { readyBackend } from '../policy/model.js';
import type { TrainResult } from '../policy/local-trainer.js';
import { updatePolicy } from '../training/policy-update.js';
import type { PolicyTrainer, TrainInput } from '../training/policy-trainer.js';
import { DATA_DIR_PREFIX, resolvedCheckpointLocation, storedCheckpointLocation } from './checkpoint-location.js';
import { openRegistry } from './open.js';
import { registryFile, SqlitePolicyRegistry } from './registry-store.js';
import { ensureServed } from './serving.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-checkpoint-location-'));
const baseModel = path.join(packageRoot(), 'models', 'base');

/**
 * An OpenAI-compatible server with vLLM's adapter API that loads what it is given, as the embedded policy server does.
 */
let server: Server;
let endpoint: string;
const loaded: Array<{ lora_name: string; lora_path: string }> = [];
beforeAll(async () => {
  await readyBackend();
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (req.url === '/v1/load_lora_adapter') {
        const request = JSON.parse(body) as { lora_name: string; lora_path: string };
        try {
          loadCheckpoint(request.lora_path).model.dispose();
          loaded.push(request);
        } catch (err) {
          res.statusCode = 400;
          res.end((err as Error).message);
          return;
        }
      }
      res.setHeader('content-type', 'application/json');
      // Listed as the embedded policy server lists them (a version is routed to once its backend lists it).
      res.end(JSON.stringify({ data: loaded.map((l) => ({ id: l.lora_name, root: l.lora_name })) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const gateway = { registerPolicy: async () => undefined } as unknown as GatewayControlClient;
const serving = () => ({ backend: 'embedded', endpoints: [endpoint] });

/** A trainer that copies its parent into the output folder, recording where it read the parent. */
function copyingTrainer(): PolicyTrainer & { parents: string[] } {
  const parents: string[] = [];
  return {
    parents,
    async train(input: TrainInput): Promise<TrainResult> {
      parents.push(input.parentCheckpoint);
      cpSync(input.parentCheckpoint, input.outputDir, { recursive: true });
      return {
        parent: input.parentCheckpoint,
        batchContentHash: 'batch',
        steps: 1,
        skippedMinibatches: 0,
        seconds: 0,
        metrics: { loss: 0, clipFraction: 0, approxKl: 0, entropy: 0, gradNorm: 0, tokens: 0 },
        reused: false,
      };
    },
  };
}

describe('checkpoint locations in the registry', () => {
  it('are stored relative to the data directory when under it, and as given otherwise', () => {
    const dataDir = path.join(dir, 'data');
    const under = path.join(dataDir, 'policies', 'run', 'run.v1');
    expect(storedCheckpointLocation(under, dataDir)).toBe(`${DATA_DIR_PREFIX}policies/run/run.v1`);
    expect(resolvedCheckpointLocation(`${DATA_DIR_PREFIX}policies/run/run.v1`, dataDir)).toBe(under);
    for (const kept of [
      baseModel,
      dataDir,
      path.join(dir, 'data-other', 'x'),
      's3://bucket/rein/policies/run/run.v1',
      `file://${under}`,
      'Qwen/Qwen3-0.6B',
      '../relative/path',
    ]) {
      expect(storedCheckpointLocation(kept, dataDir)).toBe(kept);
      expect(resolvedCheckpointLocation(kept, dataDir)).toBe(kept);
    }
  });

  it('follow a data directory that moves: its versions are still served and trained from', async () => {
    const before = path.join(dir, 'before');
    mkdirSync(before);
    const trainer = copyingTrainer();
    const registry = await openRegistry({ dataDir: before, postgresUrl: null });
    await registry.register({
      version: 'base',
      parent: null,
      runId: null,
      iteration: null,
      checkpointUri: baseModel,
      batchContentHash: null,
      trainerMetrics: {},
    });
    const job = {
      runId: 'run',
      iteration: 1,
      parentVersion: 'base',
      newVersion: 'run.v1',
      batchPath: '/unused',
      batchContentHash: 'batch',
    };
    const { policy } = await updatePolicy(job, {
      registry,
      trainer,
      gateway,
      serving: serving(),
      policiesDir: path.join(before, 'policies'),
    });
    expect(policy.checkpointUri).toBe(path.join(before, 'policies', 'run', 'run.v1'));
    // Registering the same version again is still the same lineage.
    expect(await registry.register({ ...policy })).toEqual(policy);
    await registry.close();

    const after = path.join(dir, 'after');
    renameSync(before, after);
    const moved = await openRegistry({ dataDir: after, postgresUrl: null });
    const version = await moved.get('run.v1');
    expect(version?.checkpointUri).toBe(path.join(after, 'policies', 'run', 'run.v1'));
    expect((await moved.get('base'))?.checkpointUri).toBe(baseModel);
    expect((await moved.list()).map((p) => p.checkpointUri)).toEqual([
      baseModel,
      path.join(after, 'policies', 'run', 'run.v1'),
    ]);

    loaded.length = 0; // the policy server started again from the moved directory, with nothing loaded
    await ensureServed(version!, gateway, serving());
    expect(loaded.at(-1)).toEqual({ lora_name: 'run.v1', lora_path: path.join(after, 'policies', 'run', 'run.v1') });
    await updatePolicy(
      { ...job, iteration: 2, parentVersion: 'run.v1', newVersion: 'run.v2' },
      { registry: moved, trainer, gateway, serving: serving(), policiesDir: path.join(after, 'policies') },
    );
    expect(trainer.parents).toEqual([baseModel, path.join(after, 'policies', 'run', 'run.v1')]);
    await moved.close();

    // What the store holds: the place under the data directory, not the path.
    const store = new SqlitePolicyRegistry(registryFile(after));
    await store.ready;
    expect((await store.get('run.v2'))?.checkpointUri).toBe(`${DATA_DIR_PREFIX}policies/run/run.v2`);
    await store.close();
  });

  it('written before as absolute paths are read as they were, and the same version registers again', async () => {
    const dataDir = path.join(dir, 'older');
    mkdirSync(dataDir);
    const checkpoint = path.join(dataDir, 'policies', 'run', 'run.v1');
    const lineage = {
      version: 'run.v1',
      parent: null,
      runId: 'run',
      iteration: 1,
      checkpointUri: checkpoint,
      batchContentHash: 'batch',
      trainerMetrics: {},
    };
    const store = new SqlitePolicyRegistry(registryFile(dataDir));
    await store.ready;
    await store.register(lineage);
    await store.close();
    const registry = await openRegistry({ dataDir, postgresUrl: null });
    expect((await registry.get('run.v1'))?.checkpointUri).toBe(checkpoint);
    expect((await registry.register(lineage)).checkpointUri).toBe(checkpoint);
    await registry.close();
  });
});
