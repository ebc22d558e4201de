import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { freshPostgresUrl, storeBackends, type StoreBackend } from '../../test/helpers/postgres.js';
import { recordedRewards } from '../rollouts/rewards.js';
import type { NewEvent } from '../rollouts/rollout.js';
import type { SqlTraceStore } from './journal-store.js';
import { JOURNAL_MIGRATIONS } from './journal-schema.js';
import { applyMigrations } from './migrations.js';
import { PostgresTraceStore } from './postgres-store.js';
import { openPostgresDatabase, openSqliteDatabase, type SqlDatabase } from './sql/database.js';
import { SqliteTraceStore } from './sqlite-store.js';
import { StoreAttemptScoredError, StoreAttemptSupersededError, StoreNotFoundError } from './trace-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-rewards-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const reward = (value: number): NewEvent => ({ type: 'reward', value, components: { success: value } });
const span = (actionId: string): NewEvent => ({
  type: 'span',
  actionId,
  name: 'grade',
  kind: 'tool',
  permission: 'not_applicable',
});

/** A journal on `backend`, and `gateways` stores writing to it at once (one connection each, as gateways would). */
async function journalOn(backend: StoreBackend, gateways = 1): Promise<SqlTraceStore[]> {
  if (backend === 'sqlite') {
    const file = path.join(mkdtempSync(path.join(dir, 'db-')), 'traces.sqlite');
    return Array.from({ length: gateways }, () => new SqliteTraceStore(file));
  }
  const url = await freshPostgresUrl();
  const first = await PostgresTraceStore.open(url, { gateway: 'g0' });
  const others = await Promise.all(
    Array.from({ length: gateways - 1 }, (_, i) => PostgresTraceStore.open(url, { gateway: `g${i + 1}` })),
  );
  return [first, ...others];
}

async function adminRewardsOf(store: SqlTraceStore, rolloutId: string) {
  return (await store.listEvents(rolloutId)).filter((e) => e.type === 'reward' && e.source === 'admin');
}

describe.each(storeBackends)("the verifier's reward, once per rollout attempt (%s)", (backend) => {
  it('records one of 20 racing rewards for an attempt; every caller gets that one back', async () => {
    const stores = await journalOn(backend, 2);
    try {
      await stores[0]!.createRollout({ id: 'raced' });
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => stores[i % 2]!.appendEvent('raced', 1, reward(i / 20), 'admin')),
      );
      const stored = await adminRewardsOf(stores[0]!, 'raced');
      expect(stored).toHaveLength(1);
      for (const result of results) {
        expect(result).toMatchObject({ id: stored[0]!.id, payload: stored[0]!.payload, attempt: 1 });
      }
      expect(results.filter((r) => r.duplicate)).toHaveLength(19);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it("lets no harness span, whatever its action id, take or replace the verifier's reward", async () => {
    const [store] = await journalOn(backend);
    try {
      await store!.createRollout({ id: 'graded' });
      const actionIds = ['reward', 'reward:1', 'graded:1', '1', 'admin', 'verifier', 'null'];
      for (const id of actionIds) await store!.appendEvent('graded', 1, span(id), 'rollout');
      await store!.appendEvent('graded', 1, reward(1), 'rollout');
      const verified = await store!.appendEvent('graded', 1, reward(0.25), 'admin');
      expect(verified).toMatchObject({ source: 'admin', payload: { value: 0.25 } });
      expect(verified.duplicate).toBeUndefined();
      // The harness keeps reporting: its spans and rewards are its own, the verifier's stands.
      for (const id of actionIds) await store!.appendEvent('graded', 1, span(`${id}-again`), 'rollout');
      await store!.appendEvent('graded', 1, reward(1), 'rollout');
      expect(await adminRewardsOf(store!, 'graded')).toEqual([verified]);
      expect(recordedRewards(await store!.listEvents('graded'))).toEqual({
        verified: 0.25,
        reported: 1,
        disagrees: true,
      });
    } finally {
      await store!.close();
    }
  });

  it("refuses a superseded attempt's reward and scores the current one, finished or not", async () => {
    const [store] = await journalOn(backend);
    try {
      await store!.createRollout({ id: 'retried' });
      await store!.startAttempt('retried');
      const late = await store!.appendEvent('retried', 1, reward(1), 'admin').catch((err: unknown) => err);
      expect(late).toBeInstanceOf(StoreAttemptSupersededError);
      expect(late).toMatchObject({ status: 409, code: 'attempt_superseded' });
      expect((late as Error).message).toBe(
        "attempt 1 of rollout retried was superseded by attempt 2; the verifier's reward scores the current attempt only",
      );
      await expect(store!.appendEvent('retried', 3, reward(1), 'admin')).rejects.toBeInstanceOf(StoreNotFoundError);
      const current = await store!.appendEvent('retried', 2, reward(0.5), 'admin');
      await store!.setRolloutStatus('retried', { status: 'failed', failureClass: 'model', attempt: 2 }, 'admin');
      // Finished, the rollout keeps the reward it has (the gateway has always let the admin append to it).
      expect(await store!.appendEvent('retried', 2, reward(0), 'admin')).toEqual({ ...current, duplicate: true });
      expect(await adminRewardsOf(store!, 'retried')).toEqual([current]);
    } finally {
      await store!.close();
    }
  });

  it('starts no new attempt once the current one is scored, so a rollout is scored once', async () => {
    const stores = await journalOn(backend, 2);
    try {
      await stores[0]!.createRollout({ id: 'taken-over' });
      // The runner that went quiet scores its attempt while another takes the rollout over.
      const [scored, next] = await Promise.allSettled([
        stores[0]!.appendEvent('taken-over', 1, reward(1), 'admin'),
        stores[1]!.startAttempt('taken-over'),
      ]);
      const rewards = await adminRewardsOf(stores[0]!, 'taken-over');
      if (next.status === 'fulfilled') {
        // The new attempt came first: the late reward was refused and the rollout has none yet.
        expect(scored).toMatchObject({ status: 'rejected', reason: { code: 'attempt_superseded' } });
        expect(rewards).toEqual([]);
      } else {
        expect(scored.status).toBe('fulfilled');
        expect(rewards).toHaveLength(1);
      }
      if (rewards.length === 0) await stores[0]!.appendEvent('taken-over', 2, reward(1), 'admin');
      const refused = await stores[1]!.startAttempt('taken-over').catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(StoreAttemptScoredError);
      expect(refused).toMatchObject({ status: 409, code: 'attempt_scored' });
      expect((refused as Error).message).toMatch(
        /^attempt \d of rollout taken-over was scored by the verifier; it takes no new attempt \(finish it with that reward\)$/,
      );
      expect(await adminRewardsOf(stores[0]!, 'taken-over')).toHaveLength(1);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('migrates a journal holding two rewards for one attempt: both stay, the first holds the slot', async () => {
    const location = backend === 'sqlite' ? path.join(mkdtempSync(path.join(dir, 'old-')), 'traces.sqlite') : '';
    const url = backend === 'postgres' ? await freshPostgresUrl() : '';
    const before: SqlDatabase =
      backend === 'sqlite'
        ? openSqliteDatabase(location, { pragmas: [], migrate: migrationOne })
        : await openPostgresDatabase(url, { migrate: migrationOne });
    await before.ready;
    await before.runScript(
      before.db,
      `INSERT INTO rollouts (id, mode, status, attempts, keyless, metadata, created_at, updated_at)
           VALUES ('legacy', 'train', 'succeeded', 2, 0, '{}', 0, 0);
         INSERT INTO events (rollout_id, attempt, type, source, action_id, payload, at) VALUES
           ('legacy', 1, 'reward', 'admin', NULL, '{"value":0.1}', 1),
           ('legacy', 1, 'reward', 'admin', NULL, '{"value":0.2}', 2),
           ('legacy', 2, 'reward', 'admin', NULL, '{"value":0.5}', 3),
           ('legacy', 2, 'reward', 'rollout', NULL, '{"value":0.9}', 4),
           ('legacy', 2, 'reward', 'admin', NULL, '{"value":0.7}', 5)`,
    );
    await before.close();

    const store = backend === 'sqlite' ? new SqliteTraceStore(location) : await PostgresTraceStore.open(url);
    try {
      await store.ready;
      const slots = await sql<{ value: string; reward_attempt: number | null }>`
        SELECT payload AS value, reward_attempt FROM events ORDER BY id`.execute(store['database'].db);
      expect(slots.rows.map((r) => [JSON.parse(r.value).value, r.reward_attempt])).toEqual([
        [0.1, 1],
        [0.2, null],
        [0.5, 2],
        [0.9, null],
        [0.7, null],
      ]);
      const events = await store.listEvents('legacy');
      expect(events).toHaveLength(5);
      expect(recordedRewards(events).verified).toBe(0.5);
      expect(await store.appendEvent('legacy', 2, reward(1), 'admin')).toMatchObject({
        payload: { value: 0.5 },
        duplicate: true,
      });
    } finally {
      await store.close();
    }
  });
});

/** The journal's schema as Rein wrote it before rewards had a slot. */
function migrationOne(database: SqlDatabase): Promise<void> {
  return applyMigrations(database, 'traces', JOURNAL_MIGRATIONS.slice(0, 1));
}
