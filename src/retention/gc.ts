import path from 'node:path';
import { nameInStore, type ArtifactEntry, type ArtifactStore } from '../artifacts/artifact-store.js';
import { stagingDir } from '../artifacts/from-config.js';
import { durationMs, type RetentionSettings } from './config.js';
import type { PolicyRegistry } from '../registry/policy-registry.js';
import { ROLLOUT_ID_PATTERN } from '../rollouts/rollout-id.js';
import { ROLLOUT_LOG_FILE } from '../rollouts/rollout-logs.js';
import type { JournalRetention, TraceStore } from '../store/trace-store.js';
import { entriesOf, remove, temporariesUnder, type DiskEntry } from './disk.js';
import {
  addCounts,
  noJournalCounts,
  ProtectedTally,
  splitPage,
  type JournalCounts,
  type ProtectedCounts,
} from './plan.js';
import { protectionOf, registryProtections, type ProtectionReason, type Protections } from './protections.js';

export interface GcDeps {
  /** The trace store; needed when retention.journal or retention.rolloutFolders is set. */
  store?: JournalRetention & Pick<TraceStore, 'getRollout'>;
  /** The policy registry (versions, decisions); needed with the store. */
  registry?: PolicyRegistry;
  dataDir: string;
  /** The local artifact folder (dataDir/artifacts), where dead writers may leave temporaries; null for S3. */
  artifactsDir: string | null;
  /** The artifact store workers upload rollout logs to; with it, retention.rolloutFolders deletes those logs too. */
  artifacts?: ArtifactStore;
}

export interface GcOptions {
  retention: RetentionSettings;
  /** Say what would go; delete nothing. */
  dryRun: boolean;
  /** The time cutoffs count back from (ms); now by default. */
  now?: number;
  /** Rollouts per page read and per delete transaction. */
  batchSize?: number;
}

interface Section {
  /** The setting as written ("30d"). */
  retention: string;
  /** Older than this goes (ISO time). */
  cutoff: string;
}

export interface GcReport {
  dryRun: boolean;
  /** Null: retention.journal is unset, the journal is kept whole. */
  journal:
    | (Section & {
        delete: JournalCounts;
        protected: Record<ProtectionReason, ProtectedCounts>;
        oldestKept: { id: string; updatedAt: string; reason: ProtectionReason } | null;
      })
    | null;
  rolloutFolders:
    | (Section & { delete: { folders: number; bytes: number }; protected: Record<ProtectionReason, ProtectedCounts> })
    | null;
  /**
   * The harness and verifier logs workers uploaded (rollouts/<id>/ in the artifact store), by retention.rolloutFolders.
   */
  rolloutLogs:
    | (Section & {
        delete: { rollouts: number; objects: number; bytes: number };
        protected: Record<ProtectionReason, ProtectedCounts>;
      })
    | null;
  staging: (Section & { delete: { entries: number; bytes: number } }) | null;
  /** Bytes deleted (or, in a dry run, that would be), in all. */
  bytes: number;
}

/** How far back a section keeps things: its setting, and the time it counts back to (ms). */
interface Cutoff {
  retention: string;
  at: number;
}

/** A rollout's protection, if it has one; one rule for its folder and its uploaded logs. */
type RolloutProtection = (id: string) => Promise<{ reason: ProtectionReason; by: string } | null>;

/**
 * Applies the retention settings: finished rollouts in the journal, rollout folders and staged
 * copies older than their setting go, except what must stay (protections.ts). The journal is read
 * and deleted a page at a time, each delete its own short transaction that checks again that the
 * rollout is finished and unchanged, so gateways keep writing meanwhile.
 */
export async function collectGarbage(deps: GcDeps, options: GcOptions): Promise<GcReport> {
  const now = options.now ?? Date.now();
  const cutoffOf = (setting: string | undefined): Cutoff | undefined =>
    setting === undefined ? undefined : { retention: setting, at: now - (durationMs(setting) as number) };
  const journalCutoff = cutoffOf(options.retention.journal);
  const foldersCutoff = cutoffOf(options.retention.rolloutFolders);
  const stagingCutoff = cutoffOf(options.retention.staging);

  let registryKept: Omit<Protections, 'activeBatches'> | undefined;
  const protections = async (store: JournalRetention, cutoff: number): Promise<Protections> => {
    if (!deps.registry) throw new Error('collectGarbage needs the policy registry to know what must stay');
    registryKept ??= await registryProtections(deps.registry);
    return { ...registryKept, activeBatches: new Set(await store.activeBatchIds(cutoff)) };
  };
  const needStore = () => {
    if (!deps.store)
      throw new Error('collectGarbage needs the trace store for retention.journal and retention.rolloutFolders');
    return deps.store;
  };

  const report: GcReport = {
    dryRun: options.dryRun,
    journal: null,
    rolloutFolders: null,
    rolloutLogs: null,
    staging: null,
    bytes: 0,
  };

  // Folders first: their rollouts' journal rows (status, batch) are read before the journal loses any.
  if (foldersCutoff) {
    const store = needStore();
    const protectionOfRollout = rolloutProtection(store, await protections(store, foldersCutoff.at));
    report.rolloutFolders = await collectRolloutFolders(
      deps.dataDir,
      foldersCutoff,
      protectionOfRollout,
      options.dryRun,
    );
    report.bytes += report.rolloutFolders.delete.bytes;
    if (deps.artifacts) {
      report.rolloutLogs = await collectRolloutLogs(deps.artifacts, foldersCutoff, protectionOfRollout, options.dryRun);
      report.bytes += report.rolloutLogs.delete.bytes;
    }
  }

  if (journalCutoff) {
    const store = needStore();
    const kept = await protections(store, journalCutoff.at);
    report.journal = await collectJournal(store, kept, journalCutoff, options.batchSize ?? 100, options.dryRun);
    report.bytes += report.journal.delete.bytes;
  }

  if (stagingCutoff) {
    report.staging = await collectStaging(deps, stagingCutoff, options.dryRun);
    report.bytes += report.staging.delete.bytes;
  }
  return report;
}

/** The section's setting and cutoff, as the report gives them. */
function sectionOf(cutoff: Cutoff): Section {
  return { retention: cutoff.retention, cutoff: new Date(cutoff.at).toISOString() };
}

/** One rule for a rollout's folder and its uploaded logs, wherever its worker ran. */
function rolloutProtection(store: NonNullable<GcDeps['store']>, kept: Protections): RolloutProtection {
  return async (id: string) => {
    const rollout = ROLLOUT_ID_PATTERN.test(id) ? await store.getRollout(id) : undefined;
    // No journal row: gc deleted it (nothing needed it then), or it never was; only a decision naming it keeps the
    // folder.
    const batchId = rollout?.metadata.batchId;
    return protectionOf(
      { id, status: rollout?.status ?? 'succeeded', batchId: typeof batchId === 'string' ? batchId : null },
      kept,
    );
  };
}

/** The rollouts' folders on this host (dataDir/rollouts/<id>) older than the cutoff. */
async function collectRolloutFolders(
  dataDir: string,
  cutoff: Cutoff,
  protectionOfRollout: RolloutProtection,
  dryRun: boolean,
): Promise<NonNullable<GcReport['rolloutFolders']>> {
  const tally = new ProtectedTally();
  const doomed: DiskEntry[] = [];
  for (const folder of await entriesOf(path.join(dataDir, 'rollouts'))) {
    // Rein writes only folders here; anything else is not its to delete.
    if (!folder.directory || folder.lastWrite >= cutoff.at) continue;
    const id = path.basename(folder.path);
    const protection = await protectionOfRollout(id);
    if (protection)
      tally.add(protection.reason, protection.by, { id, updatedAt: folder.lastWrite, bytes: folder.bytes });
    else doomed.push(folder);
  }
  if (!dryRun) for (const folder of doomed) await remove(folder);
  const bytes = doomed.reduce((sum, f) => sum + f.bytes, 0);
  return { ...sectionOf(cutoff), delete: { folders: doomed.length, bytes }, protected: tally.byReason };
}

/** The rollout logs workers uploaded to the artifact store whose last write is older than the cutoff. */
async function collectRolloutLogs(
  artifacts: ArtifactStore,
  cutoff: Cutoff,
  protectionOfRollout: RolloutProtection,
  dryRun: boolean,
): Promise<NonNullable<GcReport['rolloutLogs']>> {
  const tally = new ProtectedTally();
  const doomed: ArtifactEntry[] = [];
  let rollouts = 0;
  for (const [id, logs] of await uploadedLogsByRollout(artifacts)) {
    const lastWrite = Math.max(...logs.map((l) => l.modifiedAt));
    if (lastWrite >= cutoff.at) continue;
    const protection = await protectionOfRollout(id);
    if (protection)
      tally.add(protection.reason, protection.by, {
        id,
        updatedAt: lastWrite,
        bytes: logs.reduce((sum, l) => sum + l.bytes, 0),
      });
    else {
      doomed.push(...logs);
      rollouts++;
    }
  }
  if (!dryRun) for (const log of doomed) await artifacts.delete(log.uri);
  const bytes = doomed.reduce((sum, l) => sum + l.bytes, 0);
  return { ...sectionOf(cutoff), delete: { rollouts, objects: doomed.length, bytes }, protected: tally.byReason };
}

/** Finished rollouts in the journal older than the cutoff, a page (and a delete transaction) at a time. */
async function collectJournal(
  store: JournalRetention,
  kept: Protections,
  cutoff: Cutoff,
  batchSize: number,
  dryRun: boolean,
): Promise<NonNullable<GcReport['journal']>> {
  const deleted = noJournalCounts();
  const tally = new ProtectedTally();
  let after: string | null = null;
  do {
    const page = await store.listAgedRollouts(cutoff.at, { limit: batchSize, ...(after && { after }) });
    const { doomed, kept: protectedOnes } = splitPage(page.items, kept);
    for (const p of protectedOnes) tally.add(p.reason, p.by, p.rollout);
    if (dryRun) addCounts(deleted, doomed);
    else if (doomed.length > 0) {
      const gone = new Set(
        await store.deleteFinishedRollouts(
          doomed.map((r) => r.id),
          cutoff.at,
        ),
      );
      addCounts(
        deleted,
        doomed.filter((r) => gone.has(r.id)),
      );
    }
    after = page.next;
  } while (after);
  return {
    ...sectionOf(cutoff),
    delete: deleted,
    protected: tally.byReason,
    oldestKept: tally.oldest && { ...tally.oldest, updatedAt: new Date(tally.oldest.updatedAt).toISOString() },
  };
}

/** Staged copies and temporaries older than the cutoff. */
async function collectStaging(
  deps: GcDeps,
  cutoff: Cutoff,
  dryRun: boolean,
): Promise<NonNullable<GcReport['staging']>> {
  const doomed = (await stagedEntries(deps)).filter((e) => e.lastWrite < cutoff.at);
  if (!dryRun) for (const entry of doomed) await remove(entry);
  const bytes = doomed.reduce((sum, e) => sum + e.bytes, 0);
  return { ...sectionOf(cutoff), delete: { entries: doomed.length, bytes } };
}

/**
 * Staged copies (dataDir/staging: batches and checkpoints the trainer and the policy server read,
 * fetched again when needed) and temporaries of atomic writes in the local artifact folder.
 */
async function stagedEntries(deps: GcDeps): Promise<DiskEntry[]> {
  const staging = stagingDir(deps.dataDir);
  const entries: DiskEntry[] = [];
  for (const top of await entriesOf(staging)) {
    const name = path.basename(top.path);
    // The trainer's copies sit one level down; the policy server's directly in staging.
    if (name === 'batches' || name === 'checkpoints') entries.push(...(await entriesOf(top.path)));
    else entries.push(top);
  }
  if (deps.artifactsDir) entries.push(...(await temporariesUnder(deps.artifactsDir)));
  return entries;
}

/**
 * The rollout logs workers uploaded (rollouts/<id>/harness-<n>.log, verifier.log), by rollout id; nothing else there is
 * gc's.
 */
async function uploadedLogsByRollout(artifacts: ArtifactStore): Promise<Map<string, ArtifactEntry[]>> {
  const byRollout = new Map<string, ArtifactEntry[]>();
  for (const entry of await artifacts.listEntries('rollouts/')) {
    const [, id, file, ...deeper] = nameInStore(artifacts, entry.uri).split('/');
    if (
      id === undefined ||
      file === undefined ||
      deeper.length > 0 ||
      !ROLLOUT_ID_PATTERN.test(id) ||
      !ROLLOUT_LOG_FILE.test(file)
    )
      continue;
    byRollout.set(id, [...(byRollout.get(id) ?? []), entry]);
  }
  return byRollout;
}
