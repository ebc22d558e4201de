import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { COORDINATION_MIGRATIONS, type CoordinationTables } from './coordination-schema.js';
import { applyMigrations } from './migrations.js';
import type { SqlDatabase, SqlKind } from './sql/database.js';

/** A live gateway as its last heartbeat left it. */
export interface GatewayMember {
  id: string;
  joinedAt: number;
  /** The membership its shares were computed from when it counted `inFlight`. */
  view: string;
  /** Its calls in flight per limited backend, when it wrote the row. */
  inFlight: Record<string, number>;
}

export interface LeaseRequest {
  /** What is limited: a harness kind (its version). */
  kind: string;
  /** Who runs it (a worker process), for people reading the table. */
  holder: string;
  /** Leases of the kind live at once at most. */
  limit: number;
  /** How long the lease lasts unless renewed. */
  ttlMs: number;
}

/** The database's clock in ms since the epoch: one clock for every host. */
const NOW_MS: Record<SqlKind, string> = {
  postgres: '(extract(epoch from clock_timestamp()) * 1000)::bigint',
  sqlite: "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
};

/** Leases of one kind are taken one at a time (this and the kind's hash name the advisory lock). */
const LEASE_LOCK_SPACE = 0x4c656173; // "Leas"

/** Rows of a member that stopped this many times its time to live ago are deleted on a heartbeat. */
const FORGET_AFTER_TTLS = 20;

/**
 * What services sharing one database agree on (schema: coordination-schema.ts): which gateways are
 * live, with their calls in flight per limited backend; and leases on launch slots, which hold a
 * limit on running harnesses of a kind across every worker.
 */
export class CoordinationStore {
  private readonly db: Kysely<CoordinationTables>;

  private constructor(private readonly database: SqlDatabase) {
    this.db = database.db as Kysely<CoordinationTables>;
  }

  /** The store on `database` (the trace store's), its schema brought up to date first. */
  static async open(database: SqlDatabase): Promise<CoordinationStore> {
    await database.ready;
    await applyMigrations(database, 'coordination', COORDINATION_MIGRATIONS);
    return new CoordinationStore(database);
  }

  /**
   * Records that gateway `id` is live (with what it reports), forgets long-dead members, and
   * returns the live ones (seen within `ttlMs`), ordered by id.
   */
  async heartbeat(
    id: string,
    report: { view: string; inFlight: Record<string, number> },
    ttlMs: number,
  ): Promise<GatewayMember[]> {
    return this.db.transaction().execute(async (trx) => {
      const now = await this.now(trx);
      const written = { seen_at: now, view: report.view, in_flight: JSON.stringify(report.inFlight) };
      await trx
        .insertInto('gateway_members')
        .values({ id, joined_at: now, ...written })
        .onConflict((conflict) => conflict.column('id').doUpdateSet(written))
        .execute();
      await trx
        .deleteFrom('gateway_members')
        .where('seen_at', '<', now - FORGET_AFTER_TTLS * ttlMs)
        .execute();
      const rows = await trx
        .selectFrom('gateway_members')
        .selectAll()
        .where('seen_at', '>=', now - ttlMs)
        .orderBy('id')
        .execute();
      return rows.map((row) => ({
        id: row.id,
        joinedAt: Number(row.joined_at),
        view: row.view,
        inFlight: JSON.parse(row.in_flight) as Record<string, number>,
      }));
    });
  }

  /** A gateway stopping: its share goes to the others at their next heartbeat. */
  async leave(id: string): Promise<void> {
    await this.db.deleteFrom('gateway_members').where('id', '=', id).execute();
  }

  /**
   * Takes a lease when fewer than `limit` of the kind are live, after deleting the kind's expired
   * ones (their holders stopped renewing). Takers of one kind go one at a time, so two never both
   * take the last slot. Returns the lease's id, or null, and the kind's live leases before it.
   */
  async takeLease(request: LeaseRequest): Promise<{ leaseId: string | null; running: number }> {
    return this.db.transaction().execute(async (trx) => {
      if (this.database.kind === 'postgres')
        await sql`SELECT pg_advisory_xact_lock(${LEASE_LOCK_SPACE}, hashtext(${request.kind}))`.execute(trx);
      const now = await this.now(trx);
      await trx.deleteFrom('launch_leases').where('kind', '=', request.kind).where('expires_at', '<', now).execute();
      const { running } = await trx
        .selectFrom('launch_leases')
        .select((eb) => eb.fn.countAll<number>().as('running'))
        .where('kind', '=', request.kind)
        .executeTakeFirstOrThrow();
      if (Number(running) >= request.limit) return { leaseId: null, running: Number(running) };
      const leaseId = `lease-${randomUUID()}`;
      await trx
        .insertInto('launch_leases')
        .values({
          id: leaseId,
          kind: request.kind,
          holder: request.holder,
          taken_at: now,
          expires_at: now + request.ttlMs,
        })
        .execute();
      return { leaseId, running: Number(running) };
    });
  }

  /**
   * Extends a lease to `ttlMs` from now. False when it is gone: it expired and another taker
   * reclaimed its slot, so its holder runs past the limit's count.
   */
  async renewLease(leaseId: string, ttlMs: number): Promise<boolean> {
    const now = sql<number>`${sql.raw(NOW_MS[this.database.kind])}`;
    const result = await this.db
      .updateTable('launch_leases')
      .set({ expires_at: sql<number>`${now} + ${ttlMs}` })
      .where('id', '=', leaseId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Gives a slot back; false when the lease was already gone. */
  async releaseLease(leaseId: string): Promise<boolean> {
    const result = await this.db.deleteFrom('launch_leases').where('id', '=', leaseId).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  private async now(trx: Transaction<CoordinationTables>): Promise<number> {
    const { rows } = await sql<{ now: number }>`SELECT ${sql.raw(NOW_MS[this.database.kind])} AS now`.execute(trx);
    return Number(rows[0]?.now);
  }
}
