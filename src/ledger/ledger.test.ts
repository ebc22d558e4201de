import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../store/sqlite-driver.js';
import { afterAll, describe, expect, it } from 'vitest';
import { storeBackends, testStoreLocation } from '../../test/helpers/postgres.js';
import { rolloutFactsOf } from '../gate/rollout-facts.js';
import { newEventSchema, type Rollout, type RolloutEvent } from '../rollouts/rollout.js';
import type { CallRecord } from '../store/trace-store.js';
import { ledgerChanges, ledgerMetrics, type LedgerKeys } from './ledger.js';
import { openLedger } from './open.js';
import { SqliteLedger } from './ledger-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-ledger-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rollout = (over: Partial<Rollout> = {}): Rollout => ({
  id: 'b.t1.0',
  taskId: 't1',
  mode: 'eval',
  status: 'succeeded',
  statusReason: null,
  attempts: 1,
  keyless: false,
  policyVersion: 'v1',
  failureClass: null,
  metadata: { sample: 0 },
  createdAt: '',
  updatedAt: '',
  ...over,
});
const call = (attempt: number, startedAt: number, latencyMs: number, tokens: number) =>
  ({
    id: `c${startedAt}`,
    rolloutId: 'b.t1.0',
    attempt,
    seq: 1,
    status: 'ok',
    startedAt,
    latencyMs,
    usage: { prompt_tokens: tokens - 10, completion_tokens: 10 },
  }) as unknown as CallRecord;
const event = (type: RolloutEvent['type'], source: RolloutEvent['source'], payload: Record<string, unknown>) =>
  ({ id: 0, rolloutId: 'b.t1.0', attempt: 1, type, source, actionId: null, payload, at: '' }) as RolloutEvent;

describe('rollout facts and ledger metrics', () => {
  it('reads outcome, cost, retries, tool errors, interventions and reward disagreement from the journal', () => {
    const facts = rolloutFactsOf(
      rollout({ attempts: 2, metadata: { sample: 3 } }),
      [call(1, 1000, 50, 100), call(2, 2000, 100, 120), call(2, 2200, 300, 130)],
      [
        event('span', 'rollout', { name: 'calc', failure: 'bad input' }),
        event('intervention', 'rollout', { reason: 'a person approved the refund' }),
        event('reward', 'rollout', { value: 1 }),
        event('reward', 'admin', { value: 0 }),
      ],
    );
    expect(facts).toMatchObject({
      taskId: 't1',
      sample: 3,
      reward: 0,
      tokens: 350,
      steps: 3,
      latencyMs: 500,
      attempts: 2,
      toolErrors: 1,
      interventions: 1,
      rewardDisagrees: true,
    });
  });

  it('sums a set of rollouts into one ledger row, irreversible failures counted apart', () => {
    const base = rolloutFactsOf(rollout(), [call(1, 0, 10, 100)], [event('reward', 'admin', { value: 1 })]);
    const metrics = ledgerMetrics(
      [
        base,
        { ...base, reward: 0.5, attempts: 3 },
        { ...base, reward: 0, status: 'failed', failureClass: 'irreversible' },
      ],
      1,
      12.5,
    );
    expect(metrics).toEqual({
      rollouts: 3,
      unscored: 0,
      acceptedRate: 1 / 3,
      tokens: 300,
      elapsedSeconds: 12.5,
      toolErrors: 0,
      retries: 2,
      interventions: 0,
      irreversibleFailures: 1,
    });
  });

  it('leaves rollouts lost to a fault out of the accepted rate, and counts them', () => {
    const base = rolloutFactsOf(rollout(), [call(1, 0, 10, 100)], [event('reward', 'admin', { value: 1 })]);
    const lost = { ...base, reward: null, status: 'failed' as const, failureClass: 'infrastructure' as const };
    expect(ledgerMetrics([base, { ...base, reward: 0 }, lost, lost], 1, 1)).toMatchObject({
      rollouts: 4,
      unscored: 2,
      acceptedRate: 0.5,
    });
  });

  it('takes human interventions as an event type harnesses post', () => {
    expect(newEventSchema.parse({ type: 'intervention', reason: 'took over the chat', by: 'agent-42' })).toEqual({
      type: 'intervention',
      reason: 'took over the chat',
      by: 'agent-42',
    });
    expect(() => newEventSchema.parse({ type: 'intervention' })).toThrow();
  });
});

const keys = (over: Partial<{ policy: string; harness: string; taskSet: string }> = {}): LedgerKeys => ({
  model: { policyVersion: over.policy ?? 'v1', parent: 'v0' },
  harness: { version: over.harness ?? 'h-1' },
  environment: { taskSet: over.taskSet ?? 'ts1', verifier: 'ver@1', config: 'c1' },
});

describe('the ledgers', () => {
  it('says which of model, harness and environment changed between two entries', () => {
    expect(ledgerChanges(keys(), keys({ policy: 'v2' }))).toEqual({
      model: [{ field: 'policyVersion', from: 'v1', to: 'v2' }],
      harness: [],
      environment: [],
    });
    expect(ledgerChanges(keys(), keys({ harness: 'h-2', taskSet: 'ts2' }))).toMatchObject({
      model: [],
      harness: [{ field: 'version' }],
      environment: [{ field: 'taskSet', from: 'ts1', to: 'ts2' }],
    });
  });
});

describe.each(storeBackends)('the ledger store (%s)', (backend) => {
  it('records a row once per id, lists them by run and kind in the order recorded, and keeps them', async () => {
    const location = await testStoreLocation(backend, mkdtempSync(path.join(dir, `${backend}-`)));
    const ledger = await openLedger(location);
    const metrics = ledgerMetrics([], 1, 1);
    const row = {
      id: 'r.it1',
      kind: 'iteration' as const,
      runId: 'r',
      iteration: 1,
      decisionId: null,
      batchIds: ['r.it1'],
      metrics,
      ...keys(),
    };
    const first = await ledger.record(row);
    expect(first).toEqual({ ...row, at: expect.stringMatching(/^\d{4}-/) });
    expect(await ledger.record({ ...row, metrics: { ...metrics, tokens: 999 } })).toEqual(first);
    await ledger.record({ ...row, id: 'other.it1', runId: 'other' });
    await ledger.record({
      ...row,
      id: 'release.r.v1',
      kind: 'release',
      iteration: null,
      decisionId: 'd1',
      ...keys({ harness: 'h-2' }),
    });
    expect(await ledger.list({ runId: 'r' })).toEqual([
      expect.objectContaining({
        id: 'r.it1',
        metrics: expect.objectContaining({ tokens: 0 }),
        model: { policyVersion: 'v1', parent: 'v0' },
      }),
      expect.objectContaining({ id: 'release.r.v1', decisionId: 'd1', harness: { version: 'h-2' } }),
    ]);
    expect((await ledger.list({ kind: 'release' })).map((e) => e.id)).toEqual(['release.r.v1']);
    expect((await ledger.list({ runId: 'r', kind: 'iteration' })).map((e) => e.id)).toEqual(['r.it1']);
    expect(await ledger.list()).toHaveLength(3);
    expect(await ledger.get('nope')).toBeUndefined();
    await ledger.close();
    const reopened = await openLedger(location);
    expect(await reopened.get('r.it1')).toEqual(first);
    await reopened.close();
  });

  it('records an entry once when two processes record it at once, and both get the one kept', async () => {
    const location = await testStoreLocation(backend, mkdtempSync(path.join(dir, `${backend}-raced-`)));
    const [a, b] = [await openLedger(location), await openLedger(location)];
    const row = {
      id: 'release.r.v1',
      kind: 'release' as const,
      runId: 'r',
      iteration: null,
      decisionId: 'd1',
      batchIds: ['heldout.r.v1'],
      ...keys(),
    };
    // A release activity retried on another worker while the first try is still writing.
    const [first, second] = await Promise.all([
      a.record({ ...row, metrics: ledgerMetrics([], 1, 1) }),
      b.record({ ...row, metrics: ledgerMetrics([], 1, 2) }),
    ]);
    expect(second).toEqual(first);
    expect(await a.list({ runId: 'r' })).toEqual([first]);
    await a.close();
    await b.close();
  });
});

describe('ledgers made before schemas were versioned', () => {
  it('open as they are, and are recorded as schema version 1', async () => {
    const file = path.join(dir, 'old-registry.sqlite');
    const old = openDatabase(file);
    old.exec(
      `CREATE TABLE ledger (id TEXT PRIMARY KEY, kind TEXT NOT NULL, run_id TEXT, iteration INTEGER, decision_id TEXT, entry TEXT NOT NULL, at INTEGER NOT NULL)`,
    );
    old
      .prepare('INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(
        'r.it1',
        'iteration',
        'r',
        1,
        null,
        JSON.stringify({ batchIds: ['r.it1'], metrics: ledgerMetrics([], 1, 1), ...keys() }),
        1000,
      );
    old.close();
    const ledger = new SqliteLedger(file);
    expect(await ledger.list()).toEqual([
      expect.objectContaining({
        id: 'r.it1',
        runId: 'r',
        at: new Date(1000).toISOString(),
        model: { policyVersion: 'v1', parent: 'v0' },
      }),
    ]);
    await ledger.record({
      id: 'r.it2',
      kind: 'iteration',
      runId: 'r',
      iteration: 2,
      decisionId: null,
      batchIds: [],
      metrics: ledgerMetrics([], 1, 1),
      ...keys(),
    });
    expect(await ledger.list({ runId: 'r' })).toHaveLength(2);
    await ledger.close();
    const versions = openDatabase(file, { readonly: true });
    try {
      expect(versions.prepare('SELECT store, version FROM rein_schema_migrations').all()).toEqual([
        { store: 'ledger', version: 1 },
      ]);
    } finally {
      versions.close();
    }
  });
});
