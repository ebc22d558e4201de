import type { Kysely } from 'kysely';
import type { EventRow } from './journal-rows.js';
import type { JournalTables } from './journal-schema.js';
import type { JournalStatements } from './journal-statements.js';
import type { SqlDatabase } from './sql/database.js';
import { StoreAttemptSupersededError, StoreNotFoundError } from './trace-store.js';

/** The verifier's reward event to record, as journal-store.ts makes it (without the slot, which is set here). */
type RewardRow = Omit<EventRow, 'id' | 'reward_attempt'>;

/**
 * The verifier's rewards (type reward, source admin), one per rollout attempt whoever writes it: a verifier and a
 * runner that took its rollout over, or two gateways. The attempt is checked and the reward inserted in one
 * transaction that takes the rollout first (locked on PostgreSQL, as status changes do; SQLite's IMMEDIATE
 * transaction locks the file), so a reward never lands on an attempt a newer one superseded meanwhile. The slot is
 * events.reward_attempt, unique per rollout (migration 2), set by the store only: a harness chooses its spans'
 * action ids and could otherwise take it first.
 */
export class VerifierRewards {
  private readonly db: Kysely<JournalTables>;

  constructor(
    private readonly database: SqlDatabase,
    private readonly statements: JournalStatements,
  ) {
    this.db = database.db as Kysely<JournalTables>;
  }

  /** The reward recorded, or the one the attempt had already (`duplicate`). */
  async append(row: RewardRow): Promise<{ row: EventRow; duplicate: boolean }> {
    const { rollout_id: id, attempt } = row;
    return this.db.transaction().execute(async (trx) => {
      const rollout = await (this.database.rowLocks
        ? this.statements.rolloutLocked(trx, id)
        : this.statements.rollout(trx, id));
      if (!rollout) throw new StoreNotFoundError(`rollout ${id} not found`);
      // Finished rollouts still take their last attempt's reward, as the gateway has always let the admin append.
      if (attempt > rollout.attempts) throw new StoreNotFoundError(`rollout ${id} has no attempt ${attempt}`);
      if (attempt < rollout.attempts) {
        throw new StoreAttemptSupersededError(
          `attempt ${attempt} of rollout ${id} was superseded by attempt ${rollout.attempts}; the verifier's reward scores the current attempt only`,
        );
      }
      const inserted = await this.statements.insertEvent(trx, { ...row, reward_attempt: attempt });
      if (inserted) return { row: inserted, duplicate: false };
      const stored = await this.statements.rewardOfAttempt(trx, id, attempt);
      if (!stored) throw new Error(`the reward of attempt ${attempt} of rollout ${id} was neither recorded nor found`);
      return { row: stored, duplicate: true };
    });
  }
}
