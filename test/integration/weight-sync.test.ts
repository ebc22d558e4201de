import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayControlClient } from '../../src/gateway/control-client.js';
import { ensureServed } from '../../src/registry/serving.js';
import { loadVersion, ServingError, servesVersion, type EndpointCall } from '../../src/registry/weight-sync.js';
import { startVllmLikeServer, type VllmLikeServer } from '../helpers/vllm-like-server.js';

/**
 * The vLLM weight sync against the stand-in, checked against vLLM's documented contract: POST /v1/load_lora_adapter
 * {lora_name, lora_path} (answered in plain text), and GET /v1/models listing each adapter with `root` = the path it
 * was loaded from (vLLM's serving_models).
 */
let vllm: VllmLikeServer;
let loads = 0;
const call: EndpointCall = async (route, init) => {
  if (route === '/v1/load_lora_adapter') loads++;
  return fetch(`${vllm.url.replace(/\/v1$/, '')}${route}`, init);
};
beforeAll(async () => {
  vllm = await startVllmLikeServer();
});
afterAll(() => vllm.close());

describe('loading a trained version into vLLM', () => {
  const adapter = { version: 'r.v2', checkpointUri: '/policies/r/r.v2', format: 'lora' as const };

  it('posts a LoRA adapter by name and path, and routes to it only once vLLM lists it from that path', async () => {
    expect(await servesVersion('vllm', call, vllm.url, adapter)).toBe(false);
    await loadVersion('vllm', call, vllm.url, adapter);
    expect(vllm.adapters.get('r.v2')).toBe('/policies/r/r.v2');
    expect(await servesVersion('vllm', call, vllm.url, adapter)).toBe(true);
    // The same name loaded from another checkpoint is not this version.
    expect(await servesVersion('vllm', call, vllm.url, { ...adapter, checkpointUri: '/policies/other/r.v2' })).toBe(
      false,
    );
  });

  it('never posts a full-weight version as an adapter: it says how to serve one', async () => {
    const before = loads;
    for (const format of ['full', undefined] as const) {
      const full = { version: 'r.v3', checkpointUri: '/policies/r/r.v3', format };
      await expect(loadVersion('vllm', call, vllm.url, full)).rejects.toThrow(ServingError);
      await expect(loadVersion('vllm', call, vllm.url, full)).rejects.toThrow(/cannot load at run time.*LoRA/);
    }
    expect(loads).toBe(before);
    expect(vllm.adapters.has('r.v3')).toBe(false);
  });

  it('through ensureServed: a full-weight version is neither posted nor routed by the gateway', async () => {
    const routed: string[] = [];
    const gateway = { registerPolicy: async (v: string) => void routed.push(v) } as unknown as GatewayControlClient;
    const serving = { backend: 'vllm', endpoints: [vllm.url], weightSync: 'vllm' as const };
    const full = { version: 'r.v5', checkpointUri: '/policies/r/r.v5', format: 'full' as const };
    await expect(ensureServed(full, gateway, serving)).rejects.toThrow(ServingError);
    expect(routed).toEqual([]);
    const lora = { ...full, version: 'r.v6', checkpointUri: '/policies/r/r.v6', format: 'lora' as const };
    expect(await ensureServed(lora, gateway, serving)).toEqual({ loadedOn: [vllm.url.replace(/\/v1$/, '')] });
    expect(routed).toEqual(['r.v6']);
  });

  it('refuses to route a version the server accepted but does not list (a restart in between, a proxy)', async () => {
    const forgetful: EndpointCall = async (route, init) => {
      const res = await call(route, init);
      if (route === '/v1/load_lora_adapter') vllm.adapters.clear();
      return res;
    };
    const v4 = { version: 'r.v4', checkpointUri: '/policies/r/r.v4', format: 'lora' as const };
    await expect(loadVersion('vllm', forgetful, vllm.url, v4)).rejects.toThrow(/does not list it/);
  });
});
