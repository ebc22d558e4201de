import type { Kysely } from 'kysely';
import {
  ATTEMPT_FAILED,
  canTransition,
  isFinished,
  isUnscored,
  newRolloutSchema,
  statusChangeSchema,
  type NewRollout,
  type Rollout,
  type RolloutEvent,
  type StatusChange,
} from '../rollouts/rollout.js';
import { refuseOtherBody, toRollout } from './journal-rows.js';
import type { JournalTables } from './journal-schema.js';
import type { JournalStatements } from './journal-statements.js';
import type { RolloutCache } from './rollout-cache.js';
import type { QueryRunner, SqlDatabase } from './sql/database.js';
import { StoreAttemptScoredError, StoreConflictError, StoreNotFoundError } from './trace-store.js';

/**
 * A rollout's life in the journal: created once per id, moved through its statuses, given new
 * attempts, reopened after a fault cost it its score. Each change runs in one transaction that
 * first takes the rollout (locked on PostgreSQL), checks the change is allowed, and records it
 * with a status event; the rollout cache forgets the rollout before and after.
 */
export class RolloutLifecycle {
  private readonly db: Kysely<JournalTables>;

  constructor(
    private readonly database: SqlDatabase,
    private readonly statements: JournalStatements,
    private readonly rollouts: RolloutCache,
  ) {
    this.db = database.db as Kysely<JournalTables>;
  }

  async createRollout(input: NewRollout & { id: string }): Promise<{ rollout: Rollout; created: boolean }> {
    const parsed = newRolloutSchema.parse(input);
    const now = Date.now();
    this.rollouts.forget(input.id);
    const inserted = await this.db
      .insertInto('rollouts')
      .values({
        id: input.id,
        task_id: parsed.taskId ?? null,
        mode: parsed.mode,
        status: 'queued',
        status_reason: null,
        attempts: 1,
        keyless: parsed.keyless ? 1 : 0,
        policy_version: parsed.policyVersion ?? null,
        failure_class: null,
        metadata: JSON.stringify(parsed.metadata),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted) return { rollout: toRollout(inserted), created: true };
    const rollout = await this.requireRollout(this.db, input.id);
    // Compared with what was stored of the same body: text as the database keeps it (see storedText).
    const { storedText } = this.database;
    refuseOtherBody(rollout, {
      ...parsed,
      taskId: storedText(parsed.taskId),
      policyVersion: storedText(parsed.policyVersion),
    });
    return { rollout, created: false };
  }

  async setRolloutStatus(id: string, change: StatusChange, source: RolloutEvent['source']): Promise<Rollout> {
    const { status, reason = null, failureClass = null, evidence, attempt } = statusChangeSchema.parse(change);
    this.rollouts.forget(id);
    return this.db.transaction().execute(async (trx) => {
      const current = await this.requireRollout(trx, id, { lock: true });
      if (attempt !== undefined && attempt !== current.attempts) {
        throw new StoreConflictError(
          `attempt ${attempt} of rollout ${id} was superseded by attempt ${current.attempts}; only the current attempt changes its status`,
        );
      }
      if (!canTransition(current.status, status)) {
        throw new StoreConflictError(
          `rollout ${id} is ${current.status}; it cannot become ${status}` +
            (isFinished(current.status) ? ' (it has finished)' : ''),
        );
      }
      const now = Date.now();
      const updated = await trx
        .updateTable('rollouts')
        .set({ status, status_reason: reason, failure_class: failureClass, updated_at: now })
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      const payload = {
        from: current.status,
        to: status,
        reason,
        ...(failureClass && { failureClass }),
        ...(evidence && { evidence }),
      };
      await this.statements.insertEvent(trx, {
        rollout_id: id,
        attempt: current.attempts,
        type: 'status',
        source,
        action_id: null,
        payload: JSON.stringify(payload),
        at: now,
      });
      return toRollout(updated);
    });
  }

  async startAttempt(id: string): Promise<Rollout> {
    this.rollouts.forget(id);
    return this.db.transaction().execute(async (trx) => {
      const current = await this.requireRollout(trx, id, { lock: true });
      if (isFinished(current.status))
        throw new StoreConflictError(`rollout ${id} has finished (${current.status}); it takes no new attempt`);
      // Serialised with the reward's write (both take the rollout first): a scored attempt is never superseded.
      if (await this.statements.rewardOfAttempt(trx, id, current.attempts)) {
        throw new StoreAttemptScoredError(
          `attempt ${current.attempts} of rollout ${id} was scored by the verifier; it takes no new attempt (finish it with that reward)`,
        );
      }
      await this.recordSuperseded(trx, id, current.attempts, {
        failureClass: 'orchestrator',
        reason: `attempt ${current.attempts} ended without a result or a recorded failure (its runner was lost); attempt ${current.attempts + 1} started`,
      });
      const updated = await trx
        .updateTable('rollouts')
        .set((eb) => ({ attempts: eb('attempts', '+', 1), updated_at: Date.now() }))
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return toRollout(updated);
    });
  }

  async reopenRollout(id: string, reason: string): Promise<Rollout> {
    this.rollouts.forget(id);
    return this.db.transaction().execute(async (trx) => {
      const current = await this.requireRollout(trx, id, { lock: true });
      if (!isUnscored(current)) {
        const why = isFinished(current.status)
          ? `it was scored (${current.status}${current.failureClass ? `, ${current.failureClass}` : ''})`
          : `it has not finished (${current.status})`;
        throw new StoreConflictError(
          `rollout ${id} cannot be reopened: ${why}; only a rollout lost to a fault before it was scored runs again`,
        );
      }
      await this.recordSuperseded(trx, id, current.attempts, {
        failureClass: current.failureClass,
        reason: current.statusReason ?? `attempt ${current.attempts} was ${current.status}`,
      });
      const now = Date.now();
      const updated = await trx
        .updateTable('rollouts')
        .set((eb) => ({
          attempts: eb('attempts', '+', 1),
          status: 'queued',
          status_reason: reason,
          failure_class: null,
          updated_at: now,
        }))
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      const payload = {
        from: current.status,
        to: 'queued',
        reason,
        reopened: { failureClass: current.failureClass, reason: current.statusReason },
      };
      await this.statements.insertEvent(trx, {
        rollout_id: id,
        attempt: current.attempts + 1,
        type: 'status',
        source: 'admin',
        action_id: null,
        payload: JSON.stringify(payload),
        at: now,
      });
      return toRollout(updated);
    });
  }

  /**
   * An attempt superseded by the next one says why in the history (an `attempt_failed` event), whichever component
   * died: the runner usually recorded it; when nobody did, this does, in the transaction that starts the next attempt.
   */
  private async recordSuperseded(
    trx: Kysely<JournalTables>,
    id: string,
    attempt: number,
    failure: { failureClass: string | null; reason: string },
  ): Promise<void> {
    const custom = await trx
      .selectFrom('events')
      .select('payload')
      .where('rollout_id', '=', id)
      .where('attempt', '=', attempt)
      .where('type', '=', 'custom')
      .execute();
    if (custom.some((e) => (JSON.parse(e.payload) as { name?: unknown }).name === ATTEMPT_FAILED)) return;
    await this.statements.insertEvent(trx, {
      rollout_id: id,
      attempt,
      type: 'custom',
      source: 'admin',
      action_id: null,
      payload: JSON.stringify({ name: ATTEMPT_FAILED, data: { attempt, ...failure } }),
      at: Date.now(),
    });
  }

  /**
   * `lock`: PostgreSQL's FOR NO KEY UPDATE, so a status change waits for no call being journaled (their foreign keys
   * only share the row's key).
   */
  private async requireRollout(db: QueryRunner, id: string, options: { lock?: boolean } = {}): Promise<Rollout> {
    const row = await (options.lock && this.database.rowLocks
      ? this.statements.rolloutLocked(db, id)
      : this.statements.rollout(db, id));
    if (!row) throw new StoreNotFoundError(`rollout ${id} not found`);
    return toRollout(row);
  }
}
