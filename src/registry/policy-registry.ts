import type { Verdict } from '../gate/gate.js';

/**
 * Every policy version Rein made or was given, with where it came from: its parent, the run and
 * iteration, the batch it was trained on and the trainer's metrics. Registering is idempotent, so
 * a retried activity finds its version instead of making a second one.
 */
export type PolicyStatus = 'candidate' | 'promoted' | 'rejected' | 'retired';

export interface PolicyLineage {
  version: string;
  /** Null for a base policy Rein did not train. */
  parent: string | null;
  runId: string | null;
  iteration: number | null;
  /** Where the weights are: a checkpoint directory, an object store URI, a model name on the backend. */
  checkpointUri: string;
  batchContentHash: string | null;
  trainerMetrics: Record<string, unknown>;
  /** A full model folder, or a LoRA adapter served on `baseCheckpointUri`. Default full. */
  format?: 'full' | 'lora';
  /** The full base model an adapter applies to; null for full checkpoints. */
  baseCheckpointUri?: string | null;
}

export interface PolicyRecord extends PolicyLineage {
  status: PolicyStatus;
  createdAt: string;
}

export class PolicyConflictError extends Error {}

/** An alias was not where a compare-and-set move expected it. */
export class AliasMovedError extends PolicyConflictError {
  override name = 'AliasMovedError';
  constructor(
    readonly alias: string,
    readonly expected: string | null,
    readonly actual: string | null,
  ) {
    super(`${alias} moved from ${expected ?? 'unset'} to ${actual ?? 'unset'}`);
  }
}

/** A named pointer moved: by hand, by a promotion the gate passed (or an override), or by a rollback. */
export interface AliasChange {
  id: number;
  alias: string;
  /** The version the alias pointed at before; null the first time it was set. */
  from: string | null;
  to: string;
  operation: 'set' | 'promote' | 'rollback';
  /** Who moved it: a run (`run:<id>`), a user (`cli:<user>`), the API. */
  actor: string;
  reason: string | null;
  /** True when a promotion went ahead without a passing gate decision. */
  override: boolean;
  decisionId: string | null;
  at: string;
}

export type NewAliasChange = Pick<AliasChange, 'operation' | 'actor'> &
  Partial<Pick<AliasChange, 'reason' | 'override' | 'decisionId'>>;

/**
 * A version registered again must name the same policy: the existing record if it does, a PolicyConflictError if not.
 */
export function sameLineage(existing: PolicyRecord, lineage: PolicyLineage): PolicyRecord {
  const same = (['parent', 'runId', 'iteration', 'checkpointUri', 'batchContentHash'] as const).every(
    (k) => existing[k] === lineage[k],
  );
  if (!same) {
    throw new PolicyConflictError(
      `policy ${lineage.version} is already registered from ${existing.parent ?? 'no parent'} / batch ${existing.batchContentHash ?? 'none'} at ${existing.checkpointUri}; a version names one policy`,
    );
  }
  return existing;
}

/** Versions from the root to `version`, oldest first (just `version` when the registry does not know it). */
export async function lineageOf(registry: Pick<PolicyRegistry, 'get'>, version: string): Promise<string[]> {
  const chain = [version];
  for (
    let parent = (await registry.get(version))?.parent;
    parent && !chain.includes(parent);
    parent = (await registry.get(parent))?.parent
  )
    chain.push(parent);
  return chain.reverse();
}

/** A gate decision as stored: the headline fields to find it, the whole record as JSON. */
export interface StoredDecision {
  id: string;
  candidate: string;
  incumbent: string;
  verdict: Verdict;
  record: Record<string, unknown>;
  createdAt: string;
}

/**
 * The registry's operations, the same on every backend (an SQLite file, PostgreSQL). Async because
 * a database server is; each method is one statement or one transaction.
 */
export interface PolicyRegistry {
  /**
   * Registers a candidate; the same lineage again returns the record, a different one is a conflict
   * (PolicyConflictError).
   */
  register(lineage: PolicyLineage): Promise<PolicyRecord>;
  get(version: string): Promise<PolicyRecord | undefined>;
  /** In the order they were registered. */
  list(filter?: { runId?: string }): Promise<PolicyRecord[]>;
  setStatus(version: string, status: PolicyStatus): Promise<void>;
  /** The version an alias points at, if it was ever set here. */
  alias(name: string): Promise<string | undefined>;
  aliases(): Promise<Record<string, string>>;
  /**
   * Moves an alias and records who, why and on what evidence, in one transaction that also sets
   * `statuses`. With `expectedFrom`, it moves only if the alias still points there (null: unset)
   * and throws AliasMovedError otherwise: a decision made against one version says nothing about
   * another that another process put there meanwhile.
   */
  setAlias(
    alias: string,
    version: string,
    change: NewAliasChange,
    options?: { expectedFrom?: string | null; statuses?: Record<string, PolicyStatus> },
  ): Promise<AliasChange>;
  /** Changes of one alias (or all), oldest first. */
  aliasHistory(alias?: string): Promise<AliasChange[]>;
  /**
   * Idempotent by id: a retried gate activity finds the decision it already made. A pass or a fail
   * is final; an `insufficient` one is replaced once the replays are complete enough to decide.
   */
  saveDecision(decision: Omit<StoredDecision, 'createdAt'>): Promise<StoredDecision>;
  decision(id: string): Promise<StoredDecision | undefined>;
  /** Decisions about a candidate (or, with `incumbent`, those that compared a candidate with it), newest first. */
  decisionsFor(version: string, side?: 'candidate' | 'incumbent'): Promise<StoredDecision[]>;
  close(): Promise<void>;
}

/**
 * A store a long-lived service opens once, on first use, and closes when it stops. An open that
 * fails (the database is down) is tried again on the next use rather than remembered.
 */
export function openedOnFirstUse<R extends { close(): void | Promise<void> }>(
  open: () => Promise<R>,
): { get(): Promise<R>; close(): Promise<void> } {
  let opening: Promise<R> | undefined;
  return {
    get: () =>
      (opening ??= open().catch((err: unknown) => {
        opening = undefined;
        throw err;
      })),
    close: async () => {
      const opened = await opening?.catch(() => undefined);
      opening = undefined;
      await opened?.close();
    },
  };
}

/** Runs one piece of work with a store and closes it after, also when the work fails. */
export async function closingAfter<R extends { close(): void | Promise<void> }, T>(
  resource: R,
  use: (resource: R) => T | Promise<T>,
): Promise<T> {
  try {
    return await use(resource);
  } finally {
    await resource.close();
  }
}
