import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lineageOf, PolicyConflictError } from './policy-registry.js';
import { SqlitePolicyRegistry } from './sqlite-registry.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-registry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the policy registry', () => {
  it('keeps each version with its lineage; registering it again is a no-op, and a different lineage under its name is refused', async () => {
    const file = path.join(dir, 'registry.sqlite');
    const registry = new SqlitePolicyRegistry(file);
    const base = { version: 'v0', parent: null, runId: null, iteration: null, checkpointUri: '/models/base', batchContentHash: null, trainerMetrics: {} };
    const child = { version: 'r.v1', parent: 'v0', runId: 'r', iteration: 1, checkpointUri: '/p/r.v1', batchContentHash: 'abc', trainerMetrics: { steps: 8, approxKl: 0.01 } };
    await registry.register(base);
    const first = await registry.register(child);
    expect(first).toMatchObject({ ...child, status: 'candidate' });
    expect(await registry.register(child)).toEqual(first);
    await expect(registry.register({ ...child, batchContentHash: 'other' })).rejects.toThrow(PolicyConflictError);
    await expect(registry.register({ ...child, batchContentHash: 'other' })).rejects.toThrow(/already registered from v0 \/ batch abc/);
    await registry.close();
    // Durable: a new process sees the same lineage.
    const reopened = new SqlitePolicyRegistry(file);
    expect((await reopened.list()).map((p) => [p.version, p.parent])).toEqual([['v0', null], ['r.v1', 'v0']]);
    expect((await reopened.list({ runId: 'r' })).map((p) => p.version)).toEqual(['r.v1']);
    await reopened.close();
  });

  it('gives a version\'s lineage from the root, for samples.maxVersionsBehind', async () => {
    const registry = new SqlitePolicyRegistry(path.join(dir, 'lineage.sqlite'));
    const record = (version: string, parent: string | null, iteration: number | null) =>
      registry.register({ version, parent, checkpointUri: `/ckpt/${version}`, runId: parent ? 'r' : null, iteration, batchContentHash: parent ? `h-${version}` : null, trainerMetrics: {} });
    await record('v0', null, null);
    await record('r.v1', 'v0', 1);
    await record('r.v2', 'r.v1', 2);
    expect(await lineageOf(registry, 'r.v2')).toEqual(['v0', 'r.v1', 'r.v2']);
    expect(await lineageOf(registry, 'v0')).toEqual(['v0']);
    expect(await lineageOf(registry, 'unknown')).toEqual(['unknown']);
    await registry.close();
  });
});
