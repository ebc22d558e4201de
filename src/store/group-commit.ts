import type { HotPath, QueryRunner } from './sql/database.js';

/** A journal write, prepared (encoded against the store's caches) just before its group commit. */
export interface PreparedWrite {
  /**
   * Begins number their call in their rollout attempt (PostgreSQL: by taking its call_sequences
   * row): a batch takes those in one order, so two gateways' batches never deadlock. Null for others.
   */
  lockKey: string | null;
  run(db: QueryRunner): Promise<unknown>;
}

interface PendingWrite {
  prepare(): Promise<PreparedWrite>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/**
 * The journal's group commit: writes requested while the event loop handles one round of I/O are
 * written in one transaction when the round ends (setImmediate), and those requested while a
 * commit runs go together in the next; each write's promise resolves only once its transaction has
 * committed, so "durable before it returns" holds while concurrent calls share one commit. One
 * commit at a time, so a write never commits before one requested earlier (a call's finish before
 * its begin).
 *
 * A batch that fails commits nothing: `forgetCaches` drops what its writes taught the store's
 * caches (they rebuild from the journal), and each write is tried alone, so one bad write fails
 * only its own call.
 */
export class GroupCommit {
  private pending: PendingWrite[] = [];
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly db: HotPath,
    private readonly forgetCaches: () => void,
  ) {}

  /** Queues a write for the next group commit; resolves once it has committed. */
  write<T>(prepare: () => Promise<PreparedWrite>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ prepare, resolve: resolve as (value: unknown) => void, reject });
      this.flushing ??= this.flush();
    });
  }

  /** Settles once every write requested so far has committed (or failed). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  /** Commits what is queued, batch after batch, until nothing is. */
  private async flush(): Promise<void> {
    // Writes requested while the event loop handles this round of I/O join the first batch.
    await new Promise<void>((ready) => setImmediate(ready));
    for (;;) {
      const batch = this.pending;
      this.pending = [];
      if (batch.length === 0) {
        // In the same step as the check: a write queued after it starts the next flush.
        this.flushing = undefined;
        return;
      }
      if (batch.length === 1) {
        await this.commitAlone(batch[0] as PendingWrite);
        continue;
      }
      let results: unknown[];
      try {
        results = await this.commitTogether(batch);
      } catch {
        this.forgetCaches();
        for (const write of batch) await this.commitAlone(write);
        continue;
      }
      batch.forEach((write, i) => write.resolve(results[i]));
    }
  }

  private async commitTogether(batch: PendingWrite[]): Promise<unknown[]> {
    const prepared: PreparedWrite[] = [];
    for (const write of batch) prepared.push(await write.prepare());
    // Begins first, in one order of their rollout attempts; a finish or shadow call may refer to a call begun in the
    // batch.
    const order = prepared
      .map((write, i) => ({ write, i }))
      .sort(
        (a, b) =>
          rank(a.write) - rank(b.write) || (a.write.lockKey ?? '').localeCompare(b.write.lockKey ?? '') || a.i - b.i,
      );
    return this.db.transaction(async (trx) => {
      const results: unknown[] = [];
      for (const { write, i } of order) results[i] = await write.run(trx);
      return results;
    });
  }

  private async commitAlone(write: PendingWrite): Promise<void> {
    try {
      const prepared = await write.prepare();
      write.resolve(await prepared.run(this.db));
    } catch (err) {
      this.forgetCaches();
      write.reject(err);
    }
  }
}

function rank(write: PreparedWrite): number {
  return write.lockKey === null ? 1 : 0;
}
