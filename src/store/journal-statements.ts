import type { Kysely } from 'kysely';
import type { QueryRunner } from './sql/database.js';
import type { JournalDialect } from './journal-dialect.js';
import type { beginCallRow, EventRow, finishCallRow, RolloutRow } from './journal-rows.js';
import type { JournalTables } from './journal-schema.js';
import { parameter, precompile } from './sql/precompiled.js';

type BeginRow = ReturnType<typeof beginCallRow>['row'] & { gateway: string };
type FinishRow = ReturnType<typeof finishCallRow>['row'];
/** An event to insert; reward_attempt is set only on the verifier's rewards (see VerifierRewards). */
type NewEventRow = Omit<EventRow, 'id' | 'reward_attempt'> & { reward_attempt?: number | null };

/**
 * The journal's statements on the gateway's path, each compiled once (see precompile): a call's
 * begin and finish, the rollout check of every call, and the look-ups that rebuild the store's
 * caches. Each runs on the database or on a transaction of it.
 */
export class JournalStatements {
  private readonly compiled;

  constructor(db: Kysely<JournalTables>, dialect: JournalDialect) {
    const p = parameter;
    const rollout = db.selectFrom('rollouts').selectAll().where('id', '=', p('id'));
    const latestCallWhere = (column: 'prompt_suffix' | 'conversation_field') =>
      db
        .selectFrom('calls')
        .select('id')
        .where('rollout_id', '=', p('rollout_id'))
        .where(column, 'is not', null)
        .orderBy('started_at', 'desc')
        .orderBy('seq', 'desc')
        .limit(1);
    this.compiled = {
      beginCall: precompile<BeginRow, { seq: number }>({ compile: () => dialect.beginCall.compile(db) }),
      finishCall: precompile<FinishRow, unknown>(
        db
          .updateTable('calls')
          .set({
            status: p('status'),
            response: p('response'),
            prompt_ref: p('prompt_ref'),
            prompt_prefix_length: p('prompt_prefix_length'),
            prompt_suffix: p('prompt_suffix'),
            completion_ids: p('completion_ids'),
            logprobs: p('logprobs'),
            finish_reasons: p('finish_reasons'),
            usage: p('usage'),
            upstream_status: p('upstream_status'),
            error_class: p('error_class'),
            error_message: p('error_message'),
            ttft_ms: p('ttft_ms'),
            latency_ms: p('latency_ms'),
          })
          .where('id', '=', p('id')),
      ),
      rollout: precompile<{ id: string }, RolloutRow>(rollout),
      rolloutLocked: precompile<{ id: string }, RolloutRow>(rollout.forNoKeyUpdate()),
      rolloutOfCall: precompile<{ id: string }, { rollout_id: string }>(
        db.selectFrom('calls').select('rollout_id').where('id', '=', p('id')),
      ),
      latestFinishedCall: precompile<{ rollout_id: string }, { id: string }>(latestCallWhere('prompt_suffix')),
      latestConversationCall: precompile<{ rollout_id: string }, { id: string }>(latestCallWhere('conversation_field')),
      insertEvent: precompile<NewEventRow, EventRow>(
        db
          .insertInto('events')
          .values({
            rollout_id: p('rollout_id'),
            attempt: p('attempt'),
            type: p('type'),
            source: p('source'),
            action_id: p('action_id'),
            payload: p('payload'),
            at: p('at'),
            reward_attempt: p('reward_attempt'),
          })
          .onConflict((oc) => oc.doNothing())
          .returningAll(),
      ),
      rewardOfAttempt: precompile<{ rollout_id: string; reward_attempt: number }, EventRow>(
        db
          .selectFrom('events')
          .selectAll()
          .where('rollout_id', '=', p('rollout_id'))
          .where('reward_attempt', '=', p('reward_attempt')),
      ),
      changeCount:
        dialect.changeCounter &&
        precompile<object, { data_version: number }>({ compile: () => dialect.changeCounter!.compile(db) }),
    };
  }

  async beginCall(db: QueryRunner, row: BeginRow): Promise<number> {
    return ((await db.executeQuery(this.compiled.beginCall(row))).rows[0] as { seq: number }).seq;
  }

  /** How many calls it finished: 0 when no call has the id. */
  async finishCall(db: QueryRunner, row: FinishRow): Promise<number> {
    return Number((await db.executeQuery(this.compiled.finishCall(row))).numAffectedRows ?? 0);
  }

  async rollout(db: QueryRunner, id: string): Promise<RolloutRow | undefined> {
    return (await db.executeQuery(this.compiled.rollout({ id }))).rows[0];
  }

  /** PostgreSQL: FOR NO KEY UPDATE, held until the transaction ends. */
  async rolloutLocked(db: QueryRunner, id: string): Promise<RolloutRow | undefined> {
    return (await db.executeQuery(this.compiled.rolloutLocked({ id }))).rows[0];
  }

  async rolloutOfCall(db: QueryRunner, id: string): Promise<string | undefined> {
    return (await db.executeQuery(this.compiled.rolloutOfCall({ id }))).rows[0]?.rollout_id;
  }

  /** The rollout's latest call with a stored prompt: the next prompt is most likely a delta over it. */
  async latestFinishedCall(db: QueryRunner, rolloutId: string): Promise<string | undefined> {
    return (await db.executeQuery(this.compiled.latestFinishedCall({ rollout_id: rolloutId }))).rows[0]?.id;
  }

  /** The rollout's latest call with a stored conversation: the next request's is most likely a delta over it. */
  async latestConversationCall(db: QueryRunner, rolloutId: string): Promise<string | undefined> {
    return (await db.executeQuery(this.compiled.latestConversationCall({ rollout_id: rolloutId }))).rows[0]?.id;
  }

  /**
   * The event inserted, or undefined when its span (rollout_id, action_id), or the verifier's reward of its attempt
   * (rollout_id, reward_attempt), was recorded already.
   */
  async insertEvent(db: QueryRunner, row: NewEventRow): Promise<EventRow | undefined> {
    return (await db.executeQuery(this.compiled.insertEvent({ reward_attempt: null, ...row }))).rows[0];
  }

  /** The verifier's reward that holds the attempt's slot (see VerifierRewards). */
  async rewardOfAttempt(db: QueryRunner, rolloutId: string, attempt: number): Promise<EventRow | undefined> {
    return (await db.executeQuery(this.compiled.rewardOfAttempt({ rollout_id: rolloutId, reward_attempt: attempt })))
      .rows[0];
  }

  /** SQLite's data_version (see JournalDialect.changeCounter). */
  async changeCount(db: QueryRunner): Promise<number> {
    if (!this.compiled.changeCount) throw new Error('this database has no change counter');
    return Number((await db.executeQuery(this.compiled.changeCount({}))).rows[0]?.data_version);
  }
}
