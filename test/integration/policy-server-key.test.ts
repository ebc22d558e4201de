import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { defaultModelConfig, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { POLICY_SERVER_KEY_ENV, policyServerKey, policyServerKeyFile } from '../../src/policy/admin-key.js';
import { Qwen3Model, readyBackend } from '../../src/policy/model.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { ensureServed, ServingError } from '../../src/registry/serving.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-policy-key-'));
let server: PolicyServer;
let t: TestGateway;
let key: string;

beforeAll(async () => {
  await readyBackend();
  const model = Qwen3Model.init(
    defaultModelConfig({
      maxPositions: 32,
      hiddenSize: 16,
      numHeads: 2,
      numKvHeads: 1,
      headDim: 8,
      intermediateSize: 32,
      numLayers: 1,
    }),
    1,
  );
  saveCheckpoint(path.join(dir, 'v1'), model);
  model.dispose();
  key = policyServerKey(path.join(dir, 'data'), {});
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { v0: path.join(dir, 'v1') }, adminKey: key });
  t = await startTestGateway();
  t.gateway.router.update({
    backends: { embedded: { endpoints: [server.url], tokenIds: true, logprobs: true } },
    policies: {},
    aliases: {},
  });
});
afterAll(async () => {
  await t.close();
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the policy server's admin key", () => {
  it('is generated once into the data directory (0600), shared by whoever reads it, unless the environment sets one', () => {
    const file = policyServerKeyFile(path.join(dir, 'data'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(path.dirname(file)).mode & 0o777).toBe(0o700);
    expect(policyServerKey(path.join(dir, 'data'), {})).toBe(key);
    expect(policyServerKey(path.join(dir, 'data'), { [POLICY_SERVER_KEY_ENV]: 'from-env' })).toBe('from-env');
  });

  it('is what a worker sends to load a trained version; without it the load is refused, naming why', async () => {
    const gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
    const policy = { version: 'r.v1', checkpointUri: path.join(dir, 'v1') };
    const refused = ensureServed(policy, gateway, { backend: 'embedded', endpoints: [server.url] });
    await expect(refused).rejects.toBeInstanceOf(ServingError);
    await expect(refused).rejects.toThrow(/\(401\).*admin key/);
    expect(server.models()).toEqual(['v0']);

    expect(
      await ensureServed(policy, gateway, { backend: 'embedded', endpoints: [server.url], apiKey: () => key }),
    ).toEqual({ loadedOn: [server.url.replace(/\/v1$/, '')] });
    expect(server.models()).toEqual(['v0', 'r.v1']);
    expect(t.gateway.router.models().map((m) => m.id)).toContain('r.v1');
  });
});
