import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { after, journaledRollout } from '../../test/helpers/journaled-rollout.js';
import { freshPostgresUrl, storeBackends, type StoreBackend } from '../../test/helpers/postgres.js';
import type { RolloutStatus } from '../rollouts/rollout.js';
import { PostgresTraceStore } from './postgres-store.js';
import { SqliteTraceStore } from './sqlite-store.js';
import type { AgedRollout, JournalRetention, TraceStore } from './trace-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-retention-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Store = TraceStore & JournalRetention;

async function openOn(backend: StoreBackend): Promise<Store> {
  if (backend === 'sqlite') return new SqliteTraceStore(path.join(dir, `${randomUUID()}.sqlite`));
  return PostgresTraceStore.open(await freshPostgresUrl());
}

const rollout = (store: Store, id: string, batchId: string, status?: RolloutStatus) =>
  journaledRollout(store, id, batchId, { status, calls: 2, shadow: true });

async function allAged(store: Store, before: number, limit?: number): Promise<AgedRollout[]> {
  const all: AgedRollout[] = [];
  let next: string | null | undefined;
  do {
    const page = await store.listAgedRollouts(before, { ...(next && { after: next }), ...(limit && { limit }) });
    all.push(...page.items);
    next = page.next;
  } while (next);
  return all;
}

describe.each(storeBackends)('journal retention (%s)', (backend) => {
  it('lists the rollouts changed before a cutoff, with their calls, events and bytes, a page at a time; the cutoff itself is kept', async () => {
    const store = await openOn(backend);
    await rollout(store, 'old-a', 'b1');
    await rollout(store, 'old-stuck', 'b1', 'running');
    const lastOld = await rollout(store, 'old-b', 'b2', 'failed');
    const cutoff = await after(lastOld);
    const young = await rollout(store, 'young', 'b3');

    const aged = await allAged(store, cutoff, 1);
    expect(aged.map((r) => [r.id, r.status, r.batchId])).toEqual([
      ['old-a', 'succeeded', 'b1'],
      ['old-stuck', 'running', 'b1'],
      ['old-b', 'failed', 'b2'],
    ]);
    for (const r of aged) {
      expect(r).toMatchObject({ calls: 2, shadowCalls: 1 });
      // running, reward, (finished): status changes are events too.
      expect(r.events).toBeGreaterThanOrEqual(2);
      expect(r.bytes).toBeGreaterThan(2 * 250);
      expect(r.updatedAt).toBeLessThan(cutoff);
    }
    // Changed exactly at the cutoff: not older than it.
    expect((await allAged(store, young)).map((r) => r.id)).not.toContain('young');
    await store.close();
  });

  it('deletes finished rollouts with their calls, shadow calls and events, and nothing else; a rollout unfinished, or changed since, stays', async () => {
    const store = await openOn(backend);
    await rollout(store, 'old-a', 'b1');
    await rollout(store, 'old-stuck', 'b1', 'running');
    const lastOld = await rollout(store, 'old-reopened', 'b2', 'cancelled');
    const cutoff = await after(lastOld);
    await rollout(store, 'young', 'b3');
    const youngCalls = await store.listCalls('young');
    // Listed as aged, then run again before the deletion: it is in use again.
    await store.reopenRollout('old-reopened', 'run again');

    const deleted = await store.deleteFinishedRollouts(
      ['old-a', 'old-stuck', 'old-reopened', 'young', 'never-was'],
      cutoff,
    );
    expect(deleted).toEqual(['old-a']);
    expect(await store.getRollout('old-a')).toBeUndefined();
    expect(await store.listCalls('old-a')).toEqual([]);
    expect(await store.listEvents('old-a')).toEqual([]);
    expect(await store.listShadowCalls({ rolloutId: 'old-a' })).toEqual([]);
    for (const kept of ['old-stuck', 'old-reopened', 'young']) {
      expect(await store.getRollout(kept)).toBeDefined();
      expect(await store.listCalls(kept)).toHaveLength(2);
      expect(await store.listShadowCalls({ rolloutId: kept })).toHaveLength(1);
    }
    expect(await store.listCalls('young')).toEqual(youngCalls);
    expect((await allAged(store, cutoff)).map((r) => r.id)).toEqual(['old-stuck']);

    // Gone whole, counters too: the id starts afresh, its first call numbered 1.
    await store.createRollout({ id: 'old-a', taskId: 't' });
    const { seq } = await store.beginCall({
      id: randomUUID(),
      rolloutId: 'old-a',
      attempt: 1,
      endpoint: 'chat.completions',
      policyVersion: 'v1',
      backendUrl: 'http://b',
      stream: false,
      requestReceived: {},
      requestSent: {},
      startedAt: Date.now(),
    });
    expect(seq).toBe(1);
    expect(await store.deleteFinishedRollouts([], cutoff)).toEqual([]);
    await store.close();
  });

  it('names the batches still in use: those with an unfinished rollout, or one changed at or after the cutoff', async () => {
    const store = await openOn(backend);
    await rollout(store, 'done-1', 'finished-batch');
    await rollout(store, 'stuck-1', 'stuck-batch');
    await rollout(store, 'stuck-2', 'stuck-batch', 'running');
    const lastOld = await rollout(store, 'half-1', 'half-batch');
    const cutoff = await after(lastOld);
    await rollout(store, 'half-2', 'half-batch');
    await store.createRollout({ id: 'no-batch', taskId: 't' });
    expect((await store.activeBatchIds(cutoff)).sort()).toEqual(['half-batch', 'stuck-batch']);
    await store.close();
  });

  it("names the batches in use whatever else the rollouts' metadata holds: U+0000, a lone surrogate", async () => {
    const store = await openOn(backend);
    // A caller's metadata, as JSON.stringify writes it: U+0000 and a lone surrogate as escapes (\u0000, \ud800), which
    // jsonb refuses.
    await store.createRollout({
      id: 'noted',
      taskId: 't',
      metadata: {
        batchId: 'noted-batch',
        note: 'pasted \u0000 from a terminal \ud800',
        nested: ['\udc00', String.raw`\u0000 as text`],
      },
    });
    await store.createRollout({ id: 'plain', taskId: 't', metadata: { batchId: 'plain-batch' } });
    expect((await store.activeBatchIds(0)).sort()).toEqual(['noted-batch', 'plain-batch']);
    expect((await allAged(store, Date.now() + 60_000)).map((r) => [r.id, r.batchId])).toEqual([
      ['noted', 'noted-batch'],
      ['plain', 'plain-batch'],
    ]);
    await store.close();
  });
});
