import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../store/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import { storeBackends, testStoreLocation } from '../../test/helpers/postgres.js';
import { openRegistry } from './open.js';
import { AliasMovedError, lineageOf, PolicyConflictError, type PolicyRegistry } from './policy-registry.js';
import { SqlitePolicyRegistry } from './registry-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-registry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const policy = (version: string, parent: string | null = null) => ({
  version,
  parent,
  runId: null,
  iteration: null,
  checkpointUri: `/p/${version}`,
  batchContentHash: null,
  trainerMetrics: {},
});

describe.each(storeBackends)('the policy registry (%s)', (backend) => {
  /** A registry of its own: a new data directory, or a new PostgreSQL database. */
  const freshLocation = () => testStoreLocation(backend, mkdtempSync(path.join(dir, `${backend}-`)));

  it('keeps each version with its lineage; registering it again is a no-op, and a different lineage under its name is refused', async () => {
    const location = await freshLocation();
    const registry = await openRegistry(location);
    const base = {
      version: 'v0',
      parent: null,
      runId: null,
      iteration: null,
      checkpointUri: '/models/base',
      batchContentHash: null,
      trainerMetrics: {},
    };
    const child = {
      version: 'r.v1',
      parent: 'v0',
      runId: 'r',
      iteration: 1,
      checkpointUri: '/p/r.v1',
      batchContentHash: 'abc',
      trainerMetrics: { steps: 8, approxKl: 0.01 },
    };
    await registry.register(base);
    const first = await registry.register(child);
    expect(first).toMatchObject({ ...child, status: 'candidate', format: 'full', baseCheckpointUri: null });
    expect(await registry.register(child)).toEqual(first);
    await expect(registry.register({ ...child, batchContentHash: 'other' })).rejects.toThrow(PolicyConflictError);
    await expect(registry.register({ ...child, batchContentHash: 'other' })).rejects.toThrow(
      /already registered from v0 \/ batch abc/,
    );
    await registry.register({
      ...policy('r.v2', 'r.v1'),
      runId: 'r',
      format: 'lora',
      baseCheckpointUri: '/models/base',
    });
    await registry.close();
    // Durable: a new process sees the same lineage, in the order it was registered.
    const reopened = await openRegistry(location);
    expect((await reopened.list()).map((p) => [p.version, p.parent])).toEqual([
      ['v0', null],
      ['r.v1', 'v0'],
      ['r.v2', 'r.v1'],
    ]);
    expect((await reopened.list({ runId: 'r' })).map((p) => p.version)).toEqual(['r.v1', 'r.v2']);
    expect(await reopened.get('r.v2')).toMatchObject({ format: 'lora', baseCheckpointUri: '/models/base' });
    expect(await reopened.get('nope')).toBeUndefined();
    await reopened.close();
  });

  it("gives a version's lineage from the root, for samples.maxVersionsBehind", async () => {
    const registry = await openRegistry(await freshLocation());
    const record = (version: string, parent: string | null, iteration: number | null) =>
      registry.register({
        version,
        parent,
        checkpointUri: `/ckpt/${version}`,
        runId: parent ? 'r' : null,
        iteration,
        batchContentHash: parent ? `h-${version}` : null,
        trainerMetrics: {},
      });
    await record('v0', null, null);
    await record('r.v1', 'v0', 1);
    await record('r.v2', 'r.v1', 2);
    expect(await lineageOf(registry, 'r.v2')).toEqual(['v0', 'r.v1', 'r.v2']);
    expect(await lineageOf(registry, 'v0')).toEqual(['v0']);
    expect(await lineageOf(registry, 'unknown')).toEqual(['unknown']);
    await registry.close();
  });

  it("keeps a decision once it passed or failed, and replaces an insufficient one; lists a candidate's newest first", async () => {
    const registry = await openRegistry(await freshLocation());
    const insufficient = await registry.saveDecision({
      id: 'd1',
      candidate: 'v1',
      incumbent: 'v0',
      verdict: 'insufficient',
      record: { reasons: ['too few scored'] },
    });
    expect(insufficient).toMatchObject({ id: 'd1', verdict: 'insufficient', record: { reasons: ['too few scored'] } });
    expect(
      await registry.saveDecision({
        id: 'd1',
        candidate: 'v1',
        incumbent: 'v0',
        verdict: 'pass',
        record: { reasons: [] },
      }),
    ).toMatchObject({ verdict: 'pass' });
    // Final: a retried gate finds the decision it made.
    expect(
      await registry.saveDecision({
        id: 'd1',
        candidate: 'v1',
        incumbent: 'v0',
        verdict: 'fail',
        record: { reasons: ['later'] },
      }),
    ).toMatchObject({ verdict: 'pass', record: { reasons: [] } });
    await registry.saveDecision({ id: 'd2', candidate: 'v1', incumbent: 'v9', verdict: 'fail', record: {} });
    expect((await registry.decisionsFor('v1')).map((d) => d.id)).toEqual(['d2', 'd1']);
    expect(await registry.decisionsFor('v2')).toEqual([]);
    // And by the incumbent they compared with.
    expect((await registry.decisionsFor('v0', 'incumbent')).map((d) => d.id)).toEqual(['d1']);
    expect((await registry.decisionsFor('v9', 'incumbent')).map((d) => d.id)).toEqual(['d2']);
    expect(await registry.decisionsFor('v1', 'incumbent')).toEqual([]);
    expect(await registry.decision('nope')).toBeUndefined();
    await registry.close();
  });

  it('moves an alias with its record and the statuses in one step, and refuses a version it does not know or an alias that moved', async () => {
    const registry = await openRegistry(await freshLocation());
    for (const v of ['v0', 'v1']) await registry.register(policy(v));
    await expect(registry.setAlias('production', 'v9', { operation: 'set', actor: 'test' })).rejects.toThrow(
      /policy v9 is not registered/,
    );
    const set = await registry.setAlias(
      'production',
      'v0',
      { operation: 'set', actor: 'test' },
      { expectedFrom: null },
    );
    expect(set).toMatchObject({
      alias: 'production',
      from: null,
      to: 'v0',
      operation: 'set',
      actor: 'test',
      reason: null,
      override: false,
      decisionId: null,
    });
    const moved = await registry.setAlias(
      'production',
      'v1',
      { operation: 'promote', actor: 'ops', reason: 'why not', override: true, decisionId: 'd1' },
      { expectedFrom: 'v0', statuses: { v1: 'promoted', v0: 'retired' } },
    );
    expect(moved).toMatchObject({ from: 'v0', to: 'v1', override: true, decisionId: 'd1', reason: 'why not' });
    expect(moved.id).toBeGreaterThan(set.id);
    const refused = await registry
      .setAlias(
        'production',
        'v0',
        { operation: 'rollback', actor: 'late' },
        { expectedFrom: 'v0', statuses: { v0: 'promoted' } },
      )
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(AliasMovedError);
    expect(refused).toMatchObject({ alias: 'production', expected: 'v0', actual: 'v1' });
    // Refused whole: neither the alias nor a status moved.
    expect(await registry.alias('production')).toBe('v1');
    expect((await registry.get('v0'))?.status).toBe('retired');
    await registry.setAlias('canary', 'v0', { operation: 'set', actor: 'test' });
    expect(await registry.aliases()).toEqual({ canary: 'v0', production: 'v1' });
    expect((await registry.aliasHistory()).map((c) => [c.alias, c.to])).toEqual([
      ['production', 'v0'],
      ['production', 'v1'],
      ['canary', 'v0'],
    ]);
    expect(await registry.aliasHistory('production')).toEqual([set, moved]);
    await registry.close();
  });

  it('lets exactly one of two processes move an alias from where both found it, every time they race', async () => {
    const location = await freshLocation();
    // Two registries on two connections (pools), as two workers or the CLI and the API have.
    const [a, b] = [await openRegistry(location), await openRegistry(location)];
    for (const v of [
      'v0',
      'a1',
      'a2',
      'a3',
      'a4',
      'a5',
      'a6',
      'a7',
      'a8',
      'b1',
      'b2',
      'b3',
      'b4',
      'b5',
      'b6',
      'b7',
      'b8',
    ])
      await a.register(policy(v));
    await a.setAlias('production', 'v0', { operation: 'set', actor: 'test' });
    let current = 'v0';
    for (let round = 1; round <= 8; round++) {
      const move = (registry: PolicyRegistry, to: string) =>
        registry.setAlias(
          'production',
          to,
          { operation: 'promote', actor: to },
          { expectedFrom: current, statuses: { [to]: 'promoted', [current]: 'retired' } },
        );
      const results = await Promise.allSettled([move(a, `a${round}`), move(b, `b${round}`)]);
      const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.to] : []));
      const lost = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
      expect(won, `round ${round}`).toHaveLength(1);
      expect(lost[0]).toBeInstanceOf(AliasMovedError);
      expect(lost[0]).toMatchObject({ expected: current, actual: won[0] });
      current = won[0] as string;
      expect(await b.alias('production')).toBe(current);
    }
    // The history is one chain: each move starts where the one before ended.
    const history = await b.aliasHistory('production');
    expect(history).toHaveLength(9);
    history.slice(1).forEach((c, i) => expect(c.from).toBe(history[i]?.to));
    await a.close();
    await b.close();
  });

  it("sets a version's status on its own, and gives a decision back as it was saved", async () => {
    const registry = await openRegistry(await freshLocation());
    const before = Date.now();
    for (const v of ['v0', 'v1', 'v2']) await registry.register(policy(v));
    await registry.setStatus('v1', 'rejected');
    await registry.setStatus('v2', 'promoted');
    // A version it does not know: nothing to change, nothing to refuse.
    await registry.setStatus('v9', 'retired');
    expect((await registry.list()).map((p) => [p.version, p.status])).toEqual([
      ['v0', 'candidate'],
      ['v1', 'rejected'],
      ['v2', 'promoted'],
    ]);
    const v1 = await registry.get('v1');
    expect(v1?.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(v1!.createdAt)).toBeGreaterThanOrEqual(before);
    const record = {
      reasons: ['gain too small'],
      evidence: { acceptedRate: { candidate: 0.5, incumbent: 0.625 }, pairs: [['t1', 'heldout.v1.t1.0', null]] },
      note: 'é ✓',
    };
    const saved = await registry.saveDecision({
      id: 'v1.vs.v0',
      candidate: 'v1',
      incumbent: 'v0',
      verdict: 'fail',
      record,
    });
    expect(saved).toEqual({
      id: 'v1.vs.v0',
      candidate: 'v1',
      incumbent: 'v0',
      verdict: 'fail',
      record,
      createdAt: expect.stringMatching(/^\d{4}-/),
    });
    expect(await registry.decision('v1.vs.v0')).toEqual(saved);
    expect(await registry.decisionsFor('v1')).toEqual([saved]);
    await registry.close();
  });

  it('keeps a reason holding U+0000 (from an API caller) with the alias move, and finds no version by such a name', async () => {
    const registry = await openRegistry(await freshLocation());
    await registry.register(policy('v0'));
    // PostgreSQL's text cannot hold U+0000 (it refused the whole move): it keeps U+FFFD in its place.
    const reason = 'pasted \u0000 from a terminal';
    const moved = await registry.setAlias('production', 'v0', { operation: 'set', actor: 'api', reason });
    expect(moved.reason).toBe(backend === 'postgres' ? reason.replaceAll('\u0000', '\uFFFD') : reason);
    expect(await registry.aliasHistory('production')).toEqual([moved]);
    expect(await registry.get('v0\u0000')).toBeUndefined();
    expect(await registry.decision('d\u0000')).toBeUndefined();
    await registry.close();
  });

  it('registers a version once when two processes register it at once, and refuses the second of two lineages', async () => {
    const location = await freshLocation();
    const [a, b] = [await openRegistry(location), await openRegistry(location)];
    const lineage = {
      ...policy('r.v1', null),
      runId: 'r',
      iteration: 1,
      batchContentHash: 'h1',
      trainerMetrics: { steps: 4 },
    };
    // A retried activity on another worker registers the same version as the first try.
    const [first, second] = await Promise.all([a.register(lineage), b.register(lineage)]);
    expect(second).toEqual(first);
    const raced = await Promise.allSettled([
      a.register({ ...lineage, version: 'r.v2', batchContentHash: 'h2' }),
      b.register({ ...lineage, version: 'r.v2', batchContentHash: 'other' }),
    ]);
    expect(raced.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(raced.find((r) => r.status === 'rejected')?.reason).toBeInstanceOf(PolicyConflictError);
    expect((await b.list({ runId: 'r' })).map((p) => p.version)).toEqual(['r.v1', 'r.v2']);
    await a.close();
    await b.close();
  });
});

describe('registries made before schemas were versioned', () => {
  it('open as they are, with the columns added since, and are recorded as schema version 1', async () => {
    const file = path.join(dir, 'old-registry.sqlite');
    // The tables as the first registries wrote them (before adapters were recorded), with a row in each.
    const old = openDatabase(file);
    old.exec(`CREATE TABLE policies (version TEXT PRIMARY KEY, parent TEXT, run_id TEXT, iteration INTEGER, checkpoint_uri TEXT NOT NULL, batch_content_hash TEXT, trainer_metrics TEXT NOT NULL, status TEXT NOT NULL, created_at INTEGER NOT NULL);
      CREATE TABLE aliases (alias TEXT PRIMARY KEY, version TEXT NOT NULL);
      CREATE TABLE alias_changes (id INTEGER PRIMARY KEY AUTOINCREMENT, alias TEXT NOT NULL, from_version TEXT, to_version TEXT NOT NULL, operation TEXT NOT NULL, actor TEXT NOT NULL, reason TEXT, override INTEGER NOT NULL, decision_id TEXT, at INTEGER NOT NULL);
      CREATE TABLE decisions (id TEXT PRIMARY KEY, candidate TEXT NOT NULL, incumbent TEXT NOT NULL, verdict TEXT NOT NULL, record TEXT NOT NULL, created_at INTEGER NOT NULL);
      CREATE TABLE ledger (id TEXT PRIMARY KEY, kind TEXT NOT NULL, run_id TEXT, iteration INTEGER, decision_id TEXT, entry TEXT NOT NULL, at INTEGER NOT NULL);
      INSERT INTO policies VALUES ('v0', NULL, NULL, NULL, '/models/base', NULL, '{}', 'promoted', 1000);
      INSERT INTO aliases VALUES ('production', 'v0');
      INSERT INTO alias_changes (alias, from_version, to_version, operation, actor, reason, override, decision_id, at) VALUES ('production', NULL, 'v0', 'set', 'cli:ops', NULL, 0, NULL, 1000);
      INSERT INTO decisions VALUES ('d1', 'v1', 'v0', 'fail', '{"reasons":["gain too small"]}', 2000);`);
    old.close();

    const registry = new SqlitePolicyRegistry(file);
    expect(await registry.get('v0')).toMatchObject({
      version: 'v0',
      status: 'promoted',
      format: 'full',
      baseCheckpointUri: null,
      createdAt: new Date(1000).toISOString(),
    });
    expect(await registry.aliasHistory('production')).toEqual([
      expect.objectContaining({ id: 1, from: null, to: 'v0', actor: 'cli:ops', override: false }),
    ]);
    expect(await registry.decision('d1')).toMatchObject({ verdict: 'fail', record: { reasons: ['gain too small'] } });
    await registry.register({ ...policy('v1', 'v0'), format: 'lora', baseCheckpointUri: '/models/base' });
    expect(
      (await registry.setAlias('production', 'v1', { operation: 'promote', actor: 'test' }, { expectedFrom: 'v0' })).id,
    ).toBe(2);
    await registry.close();
    const versions = openDatabase(file, { readonly: true });
    try {
      expect(versions.prepare('SELECT store, version FROM rein_schema_migrations ORDER BY store').all()).toEqual([
        { store: 'registry', version: 1 },
      ]);
    } finally {
      versions.close();
    }
  });
});
