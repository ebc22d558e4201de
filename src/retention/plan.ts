import type { AgedRollout } from '../store/trace-store.js';
import { PROTECTION_REASONS, protectionOf, type ProtectionReason, type Protections } from './protections.js';

/** What deleting some rollouts from the journal removes. */
export interface JournalCounts {
  rollouts: number;
  calls: number;
  shadowCalls: number;
  events: number;
  bytes: number;
}

/** Rollouts kept for one reason: how many, their bytes, and a few of those who need them. */
export interface ProtectedCounts {
  rollouts: number;
  bytes: number;
  /** Up to EXAMPLES distinct versions, decisions or batches (rollout ids for unfinished ones). */
  by: string[];
}

const EXAMPLES = 5;

/** One page of aged rollouts, split: those to delete, and those kept with why. */
export function splitPage(
  items: readonly AgedRollout[],
  protections: Protections,
): { doomed: AgedRollout[]; kept: Array<{ rollout: AgedRollout; reason: ProtectionReason; by: string }> } {
  const doomed: AgedRollout[] = [];
  const kept: Array<{ rollout: AgedRollout; reason: ProtectionReason; by: string }> = [];
  for (const rollout of items) {
    const protection = protectionOf(rollout, protections);
    if (protection) kept.push({ rollout, ...protection });
    else doomed.push(rollout);
  }
  return { doomed, kept };
}

export const noJournalCounts = (): JournalCounts => ({ rollouts: 0, calls: 0, shadowCalls: 0, events: 0, bytes: 0 });

export function addCounts(total: JournalCounts, rollouts: readonly AgedRollout[]): void {
  for (const r of rollouts) {
    total.rollouts++;
    total.calls += r.calls;
    total.shadowCalls += r.shadowCalls;
    total.events += r.events;
    total.bytes += r.bytes;
  }
}

/** Counts of what was kept, by reason (every reason present, zero when none). */
export class ProtectedTally {
  readonly byReason = Object.fromEntries(
    PROTECTION_REASONS.map((r): [ProtectionReason, ProtectedCounts] => [r, { rollouts: 0, bytes: 0, by: [] }]),
  ) as Record<ProtectionReason, ProtectedCounts>;
  /** The oldest rollout kept among those old enough to go. */
  oldest: { id: string; updatedAt: number; reason: ProtectionReason } | null = null;

  add(reason: ProtectionReason, by: string, rollout: { id: string; updatedAt: number; bytes: number }): void {
    const entry = this.byReason[reason];
    entry.rollouts++;
    entry.bytes += rollout.bytes;
    if (entry.by.length < EXAMPLES && !entry.by.includes(by)) entry.by.push(by);
    if (!this.oldest || rollout.updatedAt < this.oldest.updatedAt)
      this.oldest = { id: rollout.id, updatedAt: rollout.updatedAt, reason };
  }
}
