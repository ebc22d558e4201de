import type { Rollout } from '../rollouts/rollout.js';
import { copyOfMetadata, SEQUENCE_CACHE_SIZE } from './journal-rows.js';

/**
 * Rollouts read lately, for the gateway's check of every call, where the database has a counter
 * that changes whenever another connection commits (SQLite's PRAGMA data_version, one cheap read):
 * what is kept is valid while the counter stands and this store has not changed the rollout. With
 * no counter (PostgreSQL) every read goes to the database.
 */
export class RolloutCache {
  private readonly rollouts = new Map<string, Rollout>();
  private counted = -1;
  /** Counts forget()s: a read that a change overlapped is not kept (it may predate the change). */
  private changes = 0;

  constructor(private readonly changeCount: (() => Promise<number>) | null) {}

  /** The rollout, from memory or from `read`; a copy each time, so callers may keep or change what they get. */
  async get(id: string, read: () => Promise<Rollout | undefined>): Promise<Rollout | undefined> {
    if (!this.changeCount) return read();
    const count = await this.changeCount();
    if (count !== this.counted) {
      // Another connection (another process) committed: anything kept may be stale.
      this.rollouts.clear();
      this.counted = count;
    }
    let rollout = this.rollouts.get(id);
    if (!rollout) {
      const changes = this.changes;
      rollout = await read();
      if (!rollout) return undefined;
      if (changes === this.changes) this.keep(id, rollout);
    }
    // Every field but metadata is a string, number or boolean.
    return { ...rollout, metadata: copyOfMetadata(rollout.metadata) };
  }

  /** Before and after this store changes a rollout: its next read goes to the database. */
  forget(id: string): void {
    this.changes++;
    this.rollouts.delete(id);
  }

  private keep(id: string, rollout: Rollout): void {
    if (this.rollouts.size >= SEQUENCE_CACHE_SIZE) this.rollouts.delete(this.rollouts.keys().next().value as string);
    this.rollouts.set(id, rollout);
  }
}
