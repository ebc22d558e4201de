import path from 'node:path';
import { sql, type Kysely, type Transaction } from 'kysely';
import { canonicalJson } from '../rollouts/harness-spec.js';
import { addMissingSqliteColumns, migrationsOf } from '../store/migrations.js';
import { openPostgresDatabase, openSqliteDatabase, type SqlDatabase } from '../store/sql/database.js';
import { announceRegistryChange } from './announce.js';
import {
  AliasMovedError,
  PolicyConflictError,
  sameLineage,
  type AliasChange,
  type NewAliasChange,
  type PolicyLineage,
  type PolicyRecord,
  type PolicyRegistry,
  type PolicyStatus,
  type StoredDecision,
} from './policy-registry.js';
import { REGISTRY_MIGRATIONS, type RegistryTables } from './registry-schema.js';
import { toAliasChange, toDecision, toRecord, type AliasChangeRow } from './rows.js';

/** The SQLite file of a data directory's registry and the ledgers beside it (created when first opened). */
export function registryFile(dataDir: string): string {
  return path.join(dataDir, 'registry.sqlite');
}

// Registries made before adapters were recorded gain the columns (their versions are full checkpoints).
const migrate = migrationsOf('registry', REGISTRY_MIGRATIONS, (database) =>
  addMissingSqliteColumns(database, 'policies', {
    format: "TEXT NOT NULL DEFAULT 'full'",
    base_checkpoint_uri: 'TEXT',
  }),
);

/** The registry on PostgreSQL, shared by the CLI, the API and workers on any host. */
export async function openPostgresRegistry(url: string): Promise<SqlPolicyRegistry> {
  // Few connections: the registry is read and written a few times per iteration, not per call.
  return new SqlPolicyRegistry(await openPostgresDatabase(url, { max: 4, migrate }));
}

/**
 * The first key of the transaction-scoped advisory lock an alias move takes on PostgreSQL (the
 * second is the alias's hash): moves of one alias queue behind each other, also while the alias
 * is unset and there is no row to lock. On SQLite the move's IMMEDIATE transaction holds the file's write lock.
 */
const ALIAS_LOCK = 0x616c6961; // "alia"

/** The registry on either database. */
export class SqlPolicyRegistry implements PolicyRegistry {
  private readonly db: Kysely<RegistryTables>;
  /** The order rows were written in: SQLite's rowid, PostgreSQL's seq. */
  private readonly writtenOrder: ReturnType<typeof sql.ref>;

  constructor(private readonly database: SqlDatabase) {
    this.db = database.db as Kysely<RegistryTables>;
    this.writtenOrder = sql.ref(database.kind === 'sqlite' ? 'rowid' : 'seq');
  }

  /** Settles once the schema is up to date (a SQLite file is migrated as it opens). */
  get ready(): Promise<void> {
    return this.database.ready;
  }

  async register(lineage: PolicyLineage): Promise<PolicyRecord> {
    const row = await this.db
      .insertInto('policies')
      .values({
        version: lineage.version,
        parent: lineage.parent,
        run_id: lineage.runId,
        iteration: lineage.iteration,
        checkpoint_uri: lineage.checkpointUri,
        batch_content_hash: lineage.batchContentHash,
        trainer_metrics: canonicalJson(lineage.trainerMetrics),
        status: 'candidate',
        created_at: Date.now(),
        format: lineage.format ?? 'full',
        base_checkpoint_uri: lineage.baseCheckpointUri ?? null,
      })
      .onConflict((oc) => oc.column('version').doNothing())
      .returningAll()
      .executeTakeFirst();
    if (row) {
      // Gateways that follow the registry route the new version (see follow.ts).
      await this.announce(this.db, `registered ${lineage.version}`);
      return toRecord(row);
    }
    // Registered before (or by a concurrent insert, which ON CONFLICT waited for): the same lineage, or a conflict.
    return sameLineage((await this.get(lineage.version)) as PolicyRecord, lineage);
  }

  async get(version: string): Promise<PolicyRecord | undefined> {
    const row = await this.db.selectFrom('policies').selectAll().where('version', '=', version).executeTakeFirst();
    return row && toRecord(row);
  }

  async list(filter: { runId?: string } = {}): Promise<PolicyRecord[]> {
    const rows = await this.db
      .selectFrom('policies')
      .selectAll()
      .$if(filter.runId !== undefined, (q) => q.where('run_id', '=', filter.runId as string))
      .orderBy(this.writtenOrder)
      .execute();
    return rows.map(toRecord);
  }

  async setStatus(version: string, status: PolicyStatus): Promise<void> {
    await this.db.updateTable('policies').set({ status }).where('version', '=', version).execute();
  }

  async alias(name: string): Promise<string | undefined> {
    return this.aliasOf(this.db, name);
  }

  async aliases(): Promise<Record<string, string>> {
    const rows = await this.db.selectFrom('aliases').select(['alias', 'version']).orderBy('alias').execute();
    return Object.fromEntries(rows.map((r) => [r.alias, r.version]));
  }

  async setAlias(
    alias: string,
    version: string,
    change: NewAliasChange,
    options: { expectedFrom?: string | null; statuses?: Record<string, PolicyStatus> } = {},
  ): Promise<AliasChange> {
    return this.db.transaction().execute(async (trx) => {
      await this.lockAlias(trx, alias);
      if (!(await trx.selectFrom('policies').select('version').where('version', '=', version).executeTakeFirst())) {
        throw new PolicyConflictError(
          `policy ${version} is not registered; an alias can only point at a registered version`,
        );
      }
      const from = (await this.aliasOf(trx, alias)) ?? null;
      if (options.expectedFrom !== undefined && from !== options.expectedFrom)
        throw new AliasMovedError(alias, options.expectedFrom, from);
      for (const [name, status] of Object.entries(options.statuses ?? {}))
        await trx.updateTable('policies').set({ status }).where('version', '=', name).execute();
      await trx
        .insertInto('aliases')
        .values({ alias, version })
        .onConflict((oc) => oc.column('alias').doUpdateSet({ version: (eb) => eb.ref('excluded.version') }))
        .execute();
      const row = await trx
        .insertInto('alias_changes')
        .values({
          alias,
          from_version: from,
          to_version: version,
          operation: change.operation,
          actor: change.actor,
          reason: change.reason ?? null,
          override: this.database.flag(change.override ?? false),
          decision_id: change.decisionId ?? null,
          at: Date.now(),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      // Delivered at COMMIT, to every gateway that follows the registry: all of them move at once.
      await this.announce(trx, `alias ${alias} ${version}`);
      return toAliasChange(row as AliasChangeRow);
    });
  }

  async aliasHistory(alias?: string): Promise<AliasChange[]> {
    const rows = await this.db
      .selectFrom('alias_changes')
      .selectAll()
      .$if(alias !== undefined, (q) => q.where('alias', '=', alias as string))
      .orderBy('id')
      .execute();
    return rows.map((row) => toAliasChange(row as AliasChangeRow));
  }

  async saveDecision(decision: Omit<StoredDecision, 'createdAt'>): Promise<StoredDecision> {
    await this.db
      .insertInto('decisions')
      .values({
        id: decision.id,
        candidate: decision.candidate,
        incumbent: decision.incumbent,
        verdict: decision.verdict,
        record: JSON.stringify(decision.record),
        created_at: Date.now(),
      })
      .onConflict((oc) =>
        oc
          .column('id')
          .doUpdateSet({
            verdict: (eb) => eb.ref('excluded.verdict'),
            record: (eb) => eb.ref('excluded.record'),
            created_at: (eb) => eb.ref('excluded.created_at'),
          })
          .where('decisions.verdict', '=', 'insufficient'),
      )
      .execute();
    return (await this.decision(decision.id)) as StoredDecision;
  }

  async decision(id: string): Promise<StoredDecision | undefined> {
    const row = await this.db.selectFrom('decisions').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toDecision(row);
  }

  async decisionsFor(version: string, side: 'candidate' | 'incumbent' = 'candidate'): Promise<StoredDecision[]> {
    const rows = await this.db
      .selectFrom('decisions')
      .selectAll()
      .where(side, '=', version)
      .orderBy('created_at', 'desc')
      .orderBy(sql`${this.writtenOrder} DESC`)
      .execute();
    return rows.map(toDecision);
  }

  async close(): Promise<void> {
    await this.database.close();
  }

  private async aliasOf(db: Kysely<RegistryTables>, name: string): Promise<string | undefined> {
    return (await db.selectFrom('aliases').select('version').where('alias', '=', name).executeTakeFirst())?.version;
  }

  /**
   * PostgreSQL: held until COMMIT, so another process's move of this alias waits here, then reads where this one put
   * it.
   */
  private async lockAlias(trx: Transaction<RegistryTables>, alias: string): Promise<void> {
    if (this.database.kind === 'postgres')
      await sql`SELECT pg_advisory_xact_lock(${ALIAS_LOCK}, hashtext(${alias}))`.execute(trx);
  }

  /**
   * PostgreSQL tells the processes that follow the registry (LISTEN/NOTIFY); SQLite's followers are in this process.
   */
  private async announce(db: Kysely<RegistryTables>, what: string): Promise<void> {
    if (this.database.kind === 'postgres') await announceRegistryChange(db, what);
  }
}

/**
 * The registry in an SQLite file: the embedded default, for one machine. Queries wait for the file's migration (see
 * `ready`).
 */
export class SqlitePolicyRegistry extends SqlPolicyRegistry {
  constructor(file: string) {
    super(openSqliteDatabase(file, { pragmas: ['journal_mode = WAL', 'busy_timeout = 5000'], migrate }));
  }
}
