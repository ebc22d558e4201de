import type { Kysely } from 'kysely';
import type { JournalDialect } from './journal-dialect.js';
import { decodeCursor, encodeCursor, toRollout } from './journal-rows.js';
import type { JournalTables } from './journal-schema.js';
import type { ListedRollout, Page, RolloutFilter } from './trace-store.js';

/** The most rollouts one page holds, whatever the caller asks. */
export const ROLLOUT_PAGE_MAX = 500;

/**
 * Rollouts newest first, filtered, a page at a time, each with the verifier's reward of its current attempt (the
 * reward event holding the attempt's slot: see VerifierRewards), so a listing filters and shows rewards without
 * reading every rollout's events.
 */
export async function listRollouts(
  db: Kysely<JournalTables>,
  dialect: JournalDialect,
  filter: RolloutFilter,
): Promise<Page<ListedRollout>> {
  const limit = Math.min(Math.max(filter.limit ?? 50, 1), ROLLOUT_PAGE_MAX);
  const before = filter.after === undefined ? undefined : decodeCursor(filter.after);
  const { status, mode, taskId, batchId, failureClass, policyVersion, minReward, maxReward } = filter;
  const rows = await db
    .selectFrom('rollouts')
    .leftJoin('events as reward', (join) =>
      join.onRef('reward.rollout_id', '=', 'rollouts.id').onRef('reward.reward_attempt', '=', 'rollouts.attempts'),
    )
    .selectAll('rollouts')
    .select(dialect.rewardValue.as('reward'))
    .$if(status !== undefined, (q) => q.where('rollouts.status', '=', status!))
    .$if(mode !== undefined, (q) => q.where('rollouts.mode', '=', mode!))
    .$if(taskId !== undefined, (q) => q.where('rollouts.task_id', '=', taskId!))
    .$if(batchId !== undefined, (q) => q.where(dialect.batchIdOfMetadata, '=', batchId!))
    .$if(failureClass !== undefined, (q) => q.where('rollouts.failure_class', '=', failureClass!))
    .$if(policyVersion !== undefined, (q) => q.where('rollouts.policy_version', '=', policyVersion!))
    .$if(minReward !== undefined, (q) => q.where(dialect.rewardValue, '>=', minReward!))
    .$if(maxReward !== undefined, (q) => q.where(dialect.rewardValue, '<=', maxReward!))
    .$if(before !== undefined, (q) => q.where('rollouts.seq', '<', before!))
    .orderBy('rollouts.seq', 'desc')
    .limit(limit + 1)
    .execute();
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items: items.map((row) => ({ ...toRollout(row), reward: row.reward === null ? null : Number(row.reward) })),
    next: rows.length > limit && last ? encodeCursor(last.seq) : null,
  };
}
