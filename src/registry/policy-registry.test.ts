import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lineageOf, PolicyConflictError, PolicyRegistry } from './policy-registry.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-registry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the policy registry', () => {
  it('keeps each version with its lineage; registering it again is a no-op, and a different lineage under its name is refused', () => {
    const file = path.join(dir, 'registry.sqlite');
    const registry = new PolicyRegistry(file);
    const base = { version: 'v0', parent: null, runId: null, iteration: null, checkpointUri: '/models/base', batchContentHash: null, trainerMetrics: {} };
    const child = { version: 'r.v1', parent: 'v0', runId: 'r', iteration: 1, checkpointUri: '/p/r.v1', batchContentHash: 'abc', trainerMetrics: { steps: 8, approxKl: 0.01 } };
    registry.register(base);
    const first = registry.register(child);
    expect(first).toMatchObject({ ...child, status: 'candidate' });
    expect(registry.register(child)).toEqual(first);
    expect(() => registry.register({ ...child, batchContentHash: 'other' })).toThrow(PolicyConflictError);
    expect(() => registry.register({ ...child, batchContentHash: 'other' })).toThrow(/already registered from v0 \/ batch abc/);
    registry.close();
    // Durable: a new process sees the same lineage.
    const reopened = new PolicyRegistry(file);
    expect(reopened.list().map((p) => [p.version, p.parent])).toEqual([['v0', null], ['r.v1', 'v0']]);
    expect(reopened.list({ runId: 'r' }).map((p) => p.version)).toEqual(['r.v1']);
    reopened.close();
  });

  it('gives a version\'s lineage from the root, for samples.maxVersionsBehind', () => {
    const registry = new PolicyRegistry(path.join(dir, 'lineage.sqlite'));
    const record = (version: string, parent: string | null, iteration: number | null) =>
      registry.register({ version, parent, checkpointUri: `/ckpt/${version}`, runId: parent ? 'r' : null, iteration, batchContentHash: parent ? `h-${version}` : null, trainerMetrics: {} });
    record('v0', null, null);
    record('r.v1', 'v0', 1);
    record('r.v2', 'r.v1', 2);
    expect(lineageOf(registry, 'r.v2')).toEqual(['v0', 'r.v1', 'r.v2']);
    expect(lineageOf(registry, 'v0')).toEqual(['v0']);
    expect(lineageOf(registry, 'unknown')).toEqual(['unknown']);
    registry.close();
  });
});
