import { isScored } from '../gate/gate.js';
import type { RolloutFacts } from '../gate/rollout-facts.js';

/**
 * Three ledgers, one row per iteration and per release, so that a change in results can be put
 * down to what changed: the model (policy version), the harness (its version), or the
 * environment (task set, verifier, environment config, and the environment module the harness's
 * tools talked to, when the run has one).
 */
export interface LedgerKeys {
  model: { policyVersion: string; parent: string | null };
  harness: { version: string };
  /**
   * `module`: the environment's id (name@version:module hash, src/environments/load.ts); absent
   * without one. `variants`: the ids of the variants some of the row's training rollouts ran in.
   */
  environment: { taskSet: string; verifier: string; config: string; module?: string; variants?: string[] };
}

export interface LedgerMetrics {
  rollouts: number;
  /** Rollouts lost to a fault before they were scored (absent in entries recorded before it was counted). */
  unscored?: number;
  /** Share of the scored rollouts whose reward reached the accept threshold. */
  acceptedRate: number;
  /** Prompt + completion tokens, summed. */
  tokens: number;
  elapsedSeconds: number;
  toolErrors: number;
  /** Attempts beyond the first. */
  retries: number;
  interventions: number;
  irreversibleFailures: number;
}

/**
 * What a `variant` row is about: one variant of the run's environment and its check with fresh
 * rollouts (its metrics are those rollouts'); the full record is in the artifact store (`record`).
 */
export interface VariantLedgerFacts {
  name: string;
  /** variantId: what it changes, in the environment it changes (environment.module). */
  id: string;
  origin: 'declared' | 'rigger';
  /** What it changes, in words (variantSummary). */
  changes: string;
  /** Why it exists: declared in config, or the weakness the rigger aimed it at. */
  why: string;
  kept: boolean;
  /** The verdict in words (validation.ts). */
  reason: string;
  samples: number;
  scored: number;
  solved: number;
  record: string;
}

export interface LedgerEntry extends LedgerKeys {
  id: string;
  /** An iteration's training, a release's held-out replay, or a variant's check before training used it. */
  kind: 'iteration' | 'release' | 'variant';
  /** Present on `variant` rows. */
  variant?: VariantLedgerFacts;
  runId: string | null;
  iteration: number | null;
  /** The gate decision behind a release. */
  decisionId: string | null;
  /** Where the metrics come from: the rollouts' batch ids. */
  batchIds: string[];
  metrics: LedgerMetrics;
  at: string;
}

export function ledgerMetrics(
  facts: readonly RolloutFacts[],
  acceptReward: number,
  elapsedSeconds: number,
): LedgerMetrics {
  // The gate's rule: a rollout the machinery lost is not a failure of the policy.
  const scored = facts.filter(isScored);
  return {
    rollouts: facts.length,
    unscored: facts.length - scored.length,
    acceptedRate:
      scored.length === 0
        ? 0
        : scored.filter((f) => f.reward !== null && f.reward >= acceptReward).length / scored.length,
    tokens: facts.reduce((s, f) => s + f.tokens, 0),
    elapsedSeconds,
    toolErrors: facts.reduce((s, f) => s + f.toolErrors, 0),
    retries: facts.reduce((s, f) => s + Math.max(0, f.attempts - 1), 0),
    interventions: facts.reduce((s, f) => s + f.interventions, 0),
    irreversibleFailures: facts.filter((f) => f.failureClass === 'irreversible').length,
  };
}

export type LedgerName = 'model' | 'harness' | 'environment';

/** Which of the three ledgers differ between two entries, field by field. */
export function ledgerChanges(
  a: LedgerKeys,
  b: LedgerKeys,
): Record<LedgerName, Array<{ field: string; from: unknown; to: unknown }>> {
  const diff = (x: Record<string, unknown>, y: Record<string, unknown>) =>
    Object.keys({ ...x, ...y })
      .filter((k) => x[k] !== y[k])
      .map((field) => ({ field, from: x[field], to: y[field] }));
  return {
    model: diff({ policyVersion: a.model.policyVersion }, { policyVersion: b.model.policyVersion }),
    harness: diff(a.harness, b.harness),
    environment: diff(a.environment, b.environment),
  };
}

/** The ledgers' operations, the same on every backend (an SQLite file, PostgreSQL). */
export interface LedgerStore {
  /** Idempotent by id: a retried activity records its entry once (the first one stays). */
  record(entry: Omit<LedgerEntry, 'at'>): Promise<LedgerEntry>;
  get(id: string): Promise<LedgerEntry | undefined>;
  /** Oldest first. */
  list(filter?: { runId?: string; kind?: LedgerEntry['kind'] }): Promise<LedgerEntry[]>;
  close(): Promise<void>;
}

/**
 * A ledger row as stored: the keys to find it by, the rest as JSON; `at` in milliseconds (PostgreSQL's BIGINT arrives
 * as text).
 */
export interface LedgerRow {
  id: string;
  kind: LedgerEntry['kind'];
  run_id: string | null;
  iteration: number | null;
  decision_id: string | null;
  entry: string;
  at: number | string;
}

export function toEntry(row: LedgerRow): LedgerEntry {
  const rest = JSON.parse(row.entry) as Omit<LedgerEntry, 'id' | 'kind' | 'runId' | 'iteration' | 'decisionId' | 'at'>;
  return {
    id: row.id,
    kind: row.kind,
    runId: row.run_id,
    iteration: row.iteration,
    decisionId: row.decision_id,
    ...rest,
    at: new Date(Number(row.at)).toISOString(),
  };
}
