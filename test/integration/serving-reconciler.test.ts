import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayControlClient } from '../../src/gateway/control-client.js';
import { openRegistry } from '../../src/registry/open.js';
import type { PolicyRegistry } from '../../src/registry/policy-registry.js';
import { keepServing, reconcileServing, type ServingState } from '../../src/registry/serving-reconciler.js';
import { startVllmLikeServer, type VllmLikeServer } from '../helpers/vllm-like-server.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-serving-reconciler-'));
let vllm: VllmLikeServer;
let registry: PolicyRegistry;
const routed: string[] = [];
const gateway = { registerPolicy: async (v: string) => void routed.push(v) } as unknown as GatewayControlClient;
const lineage = (version: string, parent: string | null) => ({
  version,
  parent,
  runId: parent === null ? null : 'r',
  iteration: parent === null ? null : 1,
  checkpointUri: `/policies/${version}`,
  batchContentHash: parent === null ? null : 'abc',
  format: 'lora' as const,
  trainerMetrics: {},
});

beforeAll(async () => {
  vllm = await startVllmLikeServer();
  registry = await openRegistry({ dataDir: dir, postgresUrl: null });
  await registry.register(lineage('v0', null));
  await registry.register(lineage('r.v1', 'v0'));
  await registry.register(lineage('r.v2', 'r.v1'));
  await registry.setAlias('production', 'r.v1', { operation: 'promote', actor: 'test' });
  await registry.setAlias('canary', 'v0', { operation: 'set', actor: 'test' });
});
afterAll(async () => {
  await registry.close();
  await vllm.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the serving reconciler', () => {
  const serving = () => ({ backend: 'vllm', endpoints: [vllm.url], weightSync: 'vllm' as const });

  it('loads what the aliases point at, and again after the backend restarted and forgot it', async () => {
    const first = await reconcileServing(registry, gateway, serving());
    // The base is the backend's own (from its config), and r.v2 is no alias's: only production's trained version.
    expect(first).toMatchObject({ needed: ['r.v1'], loaded: [{ version: 'r.v1' }], failed: [] });
    expect(vllm.adapters.get('r.v1')).toBe('/policies/r.v1');
    expect(routed).toEqual(['r.v1']);
    // Nothing missing: nothing posted.
    expect((await reconcileServing(registry, gateway, serving())).loaded).toEqual([]);

    vllm.adapters.clear(); // the inference server restarted
    const passes: ServingState[] = [];
    const loop = keepServing(
      () => reconcileServing(registry, gateway, serving()),
      (state) => passes.push(state),
      (err) => {
        throw err;
      },
      20,
    );
    await expect.poll(() => vllm.adapters.get('r.v1'), { timeout: 5000 }).toBe('/policies/r.v1');
    await loop.stop();
    expect(passes.some((p) => p.loaded.some((l) => l.version === 'r.v1'))).toBe(true);
  });

  it('says which version it could not serve and why, and goes on with the others', async () => {
    await registry.setAlias('staging', 'r.v2', { operation: 'set', actor: 'test' });
    const down = { backend: 'vllm', endpoints: ['http://127.0.0.1:9/v1'], weightSync: 'vllm' as const };
    const state = await reconcileServing(registry, gateway, down);
    expect(state.needed).toEqual(['r.v1', 'r.v2']);
    expect(state.failed.map((f) => f.version)).toEqual(['r.v1', 'r.v2']);
    expect(state.failed[0]!.reason).toMatch(/unreachable/);
  });
});
