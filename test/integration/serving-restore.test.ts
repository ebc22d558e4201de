import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { openRegistry } from '../../src/registry/open.js';
import type { PolicyRegistry } from '../../src/registry/policy-registry.js';
import { ensureServed, restoreRoutes } from '../../src/registry/serving.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts } from '../../src/rollouts/runner.js';
import { Router } from '../../src/gateway/routing.js';
import { ADMIN_KEY, routingFor, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { suiteStoreBackend, testStoreLocation } from '../helpers/postgres.js';

const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const node = (script: string, ...args: string[]) => ({ command: process.execPath, args: [script, ...args] });

let t: TestGateway;
let gateway: GatewayControlClient;
let dir: string;
let registry: PolicyRegistry;
beforeAll(async () => {
  t = await startTestGateway();
  gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
  dir = mkdtempSync(path.join(os.tmpdir(), 'rein-serving-'));
  registry = await openRegistry(await testStoreLocation(suiteStoreBackend, dir));
  const lineage = { runId: 'r', batchContentHash: 'h', trainerMetrics: {} };
  await registry.register({
    version: 'policy-v1',
    checkpointUri: dir,
    parent: null,
    runId: null,
    iteration: null,
    batchContentHash: null,
    trainerMetrics: {},
  });
  await registry.register({
    version: 'r.v1',
    checkpointUri: path.join(dir, 'r.v1'),
    parent: 'policy-v1',
    iteration: 1,
    ...lineage,
  });
  await registry.register({
    version: 'r.v2',
    checkpointUri: path.join(dir, 'r.v2'),
    parent: 'r.v1',
    iteration: 2,
    ...lineage,
  });
  await registry.setAlias('production', 'r.v1', { operation: 'set', actor: 'test', reason: 'test' });
});
afterAll(async () => {
  await registry.close();
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('serving trained versions again after a restart', () => {
  it('a starting gateway routes every trained version and the aliases the registry names', async () => {
    expect(t.gateway.router.models().map((m) => m.id)).not.toContain('r.v2');
    const first = await restoreRoutes(registry, t.gateway.router, 'toy');
    expect(first).toEqual({ restored: ['r.v1', 'r.v2'], skipped: [], skippedAliases: [] });
    expect(t.gateway.router.status().find((p) => p.policyVersion === 'r.v1')?.aliases).toContain('production');
    expect((await restoreRoutes(registry, t.gateway.router, 'toy')).restored).toEqual([]);
    // A gateway whose config lacks the serving backend still starts, and says which versions it cannot route.
    const elsewhere = await restoreRoutes(registry, new Router(routingFor(t.backend.url)), 'nowhere');
    expect(elsewhere.skipped).toEqual([expect.stringMatching(/^r\.v1: .*nowhere/), expect.stringMatching(/^r\.v2: /)]);
    expect(elsewhere.skippedAliases).toEqual([expect.stringMatching(/^production → r\.v1/)]);
  });

  it('loads a version a restarted backend forgot and routes it again before rollouts pin it', async () => {
    const v2 = (await registry.get('r.v2'))!;
    await ensureServed(v2, gateway, { backend: 'toy', endpoints: [t.backend.url] });
    expect([...t.backend.adapters.keys()]).toEqual(['r.v2']);
    t.backend.adapters.clear(); // the inference server restarted

    const spec = {
      tasks: [{ id: 'q', question: '6*7', answer: 42 }],
      samplesPerTask: 1,
      mode: 'eval' as const,
      policyVersion: 'r.v2',
      hiddenFields: ['answer'],
      rewardWeights: { success: 1 },
      concurrency: 1,
      maxAttempts: 1,
      workDir: dir,
    };
    const harness = localExecutor({
      ...node(path.join(example, 'harness.mjs'), '{task}', '{output}'),
      timeoutMs: 20_000,
    });
    const verifier = { ...node(path.join(example, 'verifier.mjs'), '{task}', '{output}'), timeoutMs: 20_000 };
    // Without Rein loading it again, the backend's 404 fails the rollout, as infrastructure (not the policy).
    const [lost] = await runRollouts({ ...spec, batchId: 'forgotten' }, { gateway, harness, verifier });
    expect(lost).toMatchObject({ status: 'failed', failureClass: 'infrastructure', reward: null });

    expect(await ensureServed(v2, gateway, { backend: 'toy', endpoints: [t.backend.url] })).toEqual({
      loadedOn: [t.backend.url.replace(/\/v1$/, '')],
    });
    const [served] = await runRollouts({ ...spec, batchId: 'served-again' }, { gateway, harness, verifier });
    expect(served).toMatchObject({ status: 'succeeded', reward: 1 });
  });

  it("says whether a version's backend answers, so launches wait out an outage instead of spending attempts", async () => {
    expect(await gateway.policyReady('policy-v1')).toEqual({ ready: true, problems: [] });
    await gateway.registerPolicy('down', { backend: 'dead', model: 'm' }).catch(() => undefined);
    t.gateway.router.update({
      ...routingFor(t.backend.url),
      backends: {
        ...routingFor(t.backend.url).backends,
        dead: { endpoints: ['http://127.0.0.1:9/v1'], tokenIds: true, logprobs: true },
      },
      policies: { ...routingFor(t.backend.url).policies, down: { backend: 'dead', model: 'm' } },
    });
    const down = await gateway.policyReady('down');
    expect(down).toMatchObject({
      ready: false,
      problems: [expect.stringMatching(/^backend dead at http:\/\/127\.0\.0\.1:9\/v1 is unreachable/)],
    });
    await expect(gateway.policyReady('never-routed')).rejects.toMatchObject({ status: 404 });
  });
});
