import { sql, type Kysely } from 'kysely';

/** The PostgreSQL channel a registry change is announced on (an alias moved, a version registered). */
export const REGISTRY_CHANNEL = 'rein_registry';

/**
 * Announces a registry change to every process that follows it (followRegistry). Sent inside the
 * change's transaction, PostgreSQL delivers it at COMMIT: only a committed change is announced.
 */
export async function announceRegistryChange(db: Kysely<any>, what: string): Promise<void> {
  await sql`SELECT pg_notify(${REGISTRY_CHANNEL}, ${what})`.execute(db);
}
