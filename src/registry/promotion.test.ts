import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { storeBackends, testStoreLocation, type StoreBackend } from '../../test/helpers/postgres.js';
import { openRegistry } from './open.js';
import type { PolicyRegistry } from './policy-registry.js';
import { PRODUCTION_ALIAS, productionOrBase, promote, PromotionError, restoreAliases, rollback } from './promotion.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-promotion-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A registry of its own on `backend`: a new data directory, or a new PostgreSQL database. */
const freshLocation = (backend: StoreBackend) => testStoreLocation(backend, mkdtempSync(path.join(dir, `${backend}-`)));

/** Registers `version` as a lineage root, its checkpoint at /p/<version>. */
const registerRoot = (registry: PolicyRegistry, version: string) =>
  registry.register({
    version,
    parent: null,
    runId: null,
    iteration: null,
    checkpointUri: `/p/${version}`,
    batchContentHash: null,
    trainerMetrics: {},
  });

async function registryWith(backend: StoreBackend, ...versions: string[]): Promise<PolicyRegistry> {
  const registry = await openRegistry(await freshLocation(backend));
  for (const version of versions) await registerRoot(registry, version);
  await registry.setAlias(PRODUCTION_ALIAS, versions[0] as string, { operation: 'set', actor: 'test' });
  return registry;
}

const decide = (
  registry: PolicyRegistry,
  candidate: string,
  incumbent: string,
  verdict: 'pass' | 'fail',
  id = `${candidate}.vs.${incumbent}`,
) =>
  registry.saveDecision({
    id,
    candidate,
    incumbent,
    verdict,
    record: { reasons: verdict === 'fail' ? ['gain too small'] : [] },
  });

describe.each(storeBackends)('promotion and rollback (%s)', (backend) => {
  it('lets only one of two promotions decided against the same production through, when another process moves it in between', async () => {
    const location = await freshLocation(backend);
    // Two connections to one registry, as the CLI and the API (or two runs' workers) have.
    const first = await openRegistry(location);
    const other = await openRegistry(location);
    for (const version of ['v0', 'v1', 'v2'])
      await first.register({
        version,
        parent: null,
        runId: null,
        iteration: null,
        checkpointUri: `/p/${version}`,
        batchContentHash: null,
        trainerMetrics: {},
      });
    await first.setAlias(PRODUCTION_ALIAS, 'v0', { operation: 'set', actor: 'test' });
    await decide(first, 'v1', 'v0', 'pass');
    await decide(first, 'v2', 'v0', 'pass');
    // The other promotion lands after this one has checked its decision against production (v0) and before it moves it.
    let raced = false;
    const racing = new Proxy(first, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown;
        if (key !== 'decisionsFor' || raced)
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        return async (...args: unknown[]) => {
          const found = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          raced = true;
          await promote(other, undefined, { version: 'v2', actor: 'other' });
          return found;
        };
      },
    });
    await expect(promote(racing, undefined, { version: 'v1', actor: 'test' })).rejects.toThrow(
      /production moved from v0 to v2 .*gate v1 against v2/,
    );
    expect(raced).toBe(true);
    expect(await first.alias(PRODUCTION_ALIAS)).toBe('v2');
    expect((await first.aliasHistory(PRODUCTION_ALIAS)).map((c) => [c.operation, c.from, c.to])).toEqual([
      ['set', null, 'v0'],
      ['promote', 'v0', 'v2'],
    ]);
    expect(await Promise.all(['v1', 'v2', 'v0'].map(async (v) => (await first.get(v))?.status))).toEqual([
      'candidate',
      'promoted',
      'retired',
    ]);
    await first.close();
    await other.close();
  });

  it('moves production only on a passing decision against the current production, and tells the gateway', async () => {
    const registry = await registryWith(backend, 'v0', 'v1', 'v2');
    const told: string[] = [];
    const gateway = { setAlias: async (_alias: string, version: string) => void told.push(version) };
    await expect(promote(registry, gateway, { version: 'v1', actor: 'test' })).rejects.toThrow(
      /no gate decision compares v1 with production \(v0\); run `rein gate v1`/,
    );
    await decide(registry, 'v1', 'v0', 'fail');
    await expect(promote(registry, gateway, { version: 'v1', actor: 'test' })).rejects.toThrow(
      /the gate refused v1 .*gain too small.*--override/,
    );
    await decide(registry, 'v1', 'v0', 'pass', 'second-look');
    const moved = await promote(registry, gateway, { version: 'v1', actor: 'test', decisionId: 'second-look' });
    expect(moved).toMatchObject({
      change: { from: 'v0', to: 'v1', operation: 'promote', decisionId: 'second-look', override: false },
      gatewayUpdated: true,
    });
    expect(told).toEqual(['v1']);
    expect((await registry.get('v1'))?.status).toBe('promoted');
    expect((await registry.get('v0'))?.status).toBe('retired');
    // A pass against v0 says nothing about v2 against v1.
    await decide(registry, 'v2', 'v0', 'pass');
    await expect(promote(registry, gateway, { version: 'v2', actor: 'test', decisionId: 'v2.vs.v0' })).rejects.toThrow(
      /compared v2 with v0, but production is now v1/,
    );
    await expect(promote(registry, gateway, { version: 'v9', actor: 'test' })).rejects.toBeInstanceOf(PromotionError);
    await registry.close();
  });

  it('records an override as one, and rolls back step by step, never forth', async () => {
    const registry = await registryWith(backend, 'v0', 'v1', 'v2');
    await promote(registry, undefined, { version: 'v1', actor: 'ops', override: { reason: 'incident 7' } });
    await decide(registry, 'v2', 'v1', 'pass');
    const unreachable = { setAlias: async () => Promise.reject(new Error('connection refused')) };
    const moved = await promote(registry, unreachable, { version: 'v2', actor: 'test' });
    // The registry moved; the gateway learns it when it starts.
    expect(moved).toMatchObject({ change: { to: 'v2' }, gatewayUpdated: false, gatewayError: 'connection refused' });
    expect((await rollback(registry, undefined, { actor: 'ops', reason: 'pager' })).change).toMatchObject({
      from: 'v2',
      to: 'v1',
      operation: 'rollback',
      reason: 'pager',
    });
    expect((await rollback(registry, undefined, { actor: 'ops' })).change).toMatchObject({ from: 'v1', to: 'v0' });
    await expect(rollback(registry, undefined, { actor: 'ops' })).rejects.toThrow(
      /production \(v0\) has no earlier version to roll back to/,
    );
    expect((await registry.aliasHistory(PRODUCTION_ALIAS)).map((c) => [c.operation, c.to, c.override])).toEqual([
      ['set', 'v0', false],
      ['promote', 'v1', true],
      ['promote', 'v2', false],
      ['rollback', 'v1', false],
      ['rollback', 'v0', false],
    ]);
    expect((await registry.aliasHistory(PRODUCTION_ALIAS))[1]?.reason).toBe('incident 7');
    await registry.close();
  });

  it('starts an unset production at the base, registering it, and then answers what production serves', async () => {
    const registry = await openRegistry(await freshLocation(backend));
    const base = { version: 'base', checkpointUri: '/p/base' };
    const request = { base, candidate: 'c1', actor: 'run:r' };
    await expect(productionOrBase(registry, undefined, request)).rejects.toThrow(
      new PromotionError(
        'policy c1 is not registered; `rein register c1 --checkpoint URI` records it (`rein policies` lists the versions)',
      ),
    );
    await registerRoot(registry, 'c1');
    const told: string[] = [];
    const gateway = { setAlias: async (alias: string, version: string) => void told.push(`${alias}=${version}`) };
    expect(await productionOrBase(registry, gateway, request)).toBe('base');
    expect(await registry.get('base')).toMatchObject({ checkpointUri: '/p/base', parent: null });
    expect(told).toEqual(['production=base']);
    expect((await registry.aliasHistory(PRODUCTION_ALIAS)).map((c) => [c.operation, c.from, c.to, c.actor])).toEqual([
      ['set', null, 'base', 'run:r'],
    ]);
    // Once set, it answers what production serves, and the gateway is not told again.
    await registry.setAlias(PRODUCTION_ALIAS, 'c1', { operation: 'set', actor: 'test' });
    expect(await productionOrBase(registry, gateway, request)).toBe('c1');
    expect(told).toEqual(['production=base']);
    await registry.close();
  });

  it('starts production at the base though the gateway cannot be told (it reads the registry when it starts)', async () => {
    const registry = await openRegistry(await freshLocation(backend));
    await registerRoot(registry, 'c1');
    const unreachable = { setAlias: async () => Promise.reject(new Error('connection refused')) };
    const request = { base: { version: 'base', checkpointUri: '/p/base' }, candidate: 'c1', actor: 'cli:me' };
    expect(await productionOrBase(registry, unreachable, request)).toBe('base');
    expect(await registry.alias(PRODUCTION_ALIAS)).toBe('base');
    await registry.close();
  });

  it("points a gateway's aliases where the registry says, skipping versions it does not serve", async () => {
    const registry = await registryWith(backend, 'v0', 'v1');
    await registry.setAlias('canary', 'v1', { operation: 'set', actor: 'test' });
    const set: string[] = [];
    const router = {
      setAlias(alias: string, version: string) {
        if (version === 'v1') throw new Error('policy v1 is not in the routing table');
        set.push(`${alias}=${version}`);
      },
    };
    expect(await restoreAliases(registry, router)).toEqual(['canary → v1: policy v1 is not in the routing table']);
    expect(set).toEqual(['production=v0']);
    await registry.close();
  });
});
