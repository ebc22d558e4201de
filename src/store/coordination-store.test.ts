import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresUrl, storeBackends } from '../../test/helpers/postgres.js';
import { CoordinationStore } from './coordination-store.js';
import { openPostgresDatabase, openSqliteDatabase, type SqlDatabase } from './sql/database.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-coordination-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.each(storeBackends)('the coordination store (%s)', (backend) => {
  let database: SqlDatabase;
  let store: CoordinationStore;
  beforeAll(async () => {
    database =
      backend === 'sqlite'
        ? openSqliteDatabase(path.join(dir, 'coordination.sqlite'), { pragmas: [] })
        : await openPostgresDatabase(await freshPostgresUrl());
    store = await CoordinationStore.open(database);
    // Opening again (a second gateway, a restart) finds its schema in place.
    await CoordinationStore.open(database);
  });
  afterAll(() => database.close());

  it('gives at most `limit` leases of a kind, and a released slot to the next taker', async () => {
    const take = (holder: string) => store.takeLease({ kind: 'h-1', holder, limit: 2, ttlMs: 60_000 });
    const [a, b] = await Promise.all([take('w1'), take('w2')]);
    expect(await take('w3')).toEqual({ leaseId: null, running: 2 });
    // Another kind has slots of its own.
    expect((await store.takeLease({ kind: 'h-2', holder: 'w3', limit: 1, ttlMs: 60_000 })).leaseId).not.toBeNull();
    expect(await store.releaseLease(a.leaseId as string)).toBe(true);
    expect(await store.releaseLease(a.leaseId as string)).toBe(false);
    expect((await take('w3')).leaseId).not.toBeNull();
    expect(await store.renewLease(b.leaseId as string, 60_000)).toBe(true);
  });

  it("reclaims an expired lease for the next taker, after which its holder's renewal fails", async () => {
    const dead = await store.takeLease({ kind: 'h-dead', holder: 'gone', limit: 1, ttlMs: 100 });
    let next = await store.takeLease({ kind: 'h-dead', holder: 'alive', limit: 1, ttlMs: 60_000 });
    while (next.leaseId === null) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      next = await store.takeLease({ kind: 'h-dead', holder: 'alive', limit: 1, ttlMs: 60_000 });
    }
    expect(await store.renewLease(dead.leaseId as string, 60_000)).toBe(false);
  });

  it('lists the live gateways by id with what they report, and forgets one that left', async () => {
    await store.heartbeat('gw-b', { view: '', inFlight: { vllm: 1 } }, 60_000);
    const live = await store.heartbeat('gw-a', { view: 'v1', inFlight: { vllm: 2 } }, 60_000);
    expect(live.map((m) => [m.id, m.view, m.inFlight])).toEqual([
      ['gw-a', 'v1', { vllm: 2 }],
      ['gw-b', '', { vllm: 1 }],
    ]);
    await store.leave('gw-b');
    expect((await store.heartbeat('gw-a', { view: 'v2', inFlight: {} }, 60_000)).map((m) => m.id)).toEqual(['gw-a']);
  });
});
