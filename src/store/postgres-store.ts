import { JOURNAL_MIGRATIONS } from './journal-schema.js';
import { SqlTraceStore } from './journal-store.js';
import { migrationsOf } from './migrations.js';
import { openPostgresDatabase } from './sql/database.js';

export interface PostgresTraceStoreOptions {
  /**
   * Names the gateway writing through this store, the same across its restarts (default
   * "default"): markLostCalls ends only calls this name began, so a gateway that starts leaves
   * the calls of the others sharing the database alone.
   */
  gateway?: string;
}

/**
 * The trace store on PostgreSQL, for several gateways and services on other hosts sharing one
 * journal. Rollouts are read from the database every time (no cache): a rollout another gateway
 * finished is refused at once, with no notification to wait for.
 */
export const PostgresTraceStore = {
  /** Connects, brings the schema up to date, and returns the store. */
  async open(url: string, options: PostgresTraceStoreOptions = {}): Promise<SqlTraceStore> {
    return new SqlTraceStore(
      await openPostgresDatabase(url, { migrate: migrationsOf('traces', JOURNAL_MIGRATIONS) }),
      options.gateway,
    );
  },
};
