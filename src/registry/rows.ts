import type { AliasChange, PolicyRecord, PolicyStatus, StoredDecision } from './policy-registry.js';

// The registry's tables have the same columns on every backend; these read a row of each into
// what callers see. Times are milliseconds since the epoch (PostgreSQL's BIGINT arrives as text).

export interface PolicyRow {
  version: string;
  parent: string | null;
  run_id: string | null;
  iteration: number | null;
  checkpoint_uri: string;
  batch_content_hash: string | null;
  trainer_metrics: string;
  status: PolicyStatus;
  created_at: number | string;
  format: 'full' | 'lora';
  base_checkpoint_uri: string | null;
}

export interface AliasChangeRow {
  id: number | string;
  alias: string;
  from_version: string | null;
  to_version: string;
  operation: AliasChange['operation'];
  actor: string;
  reason: string | null;
  override: number | boolean;
  decision_id: string | null;
  at: number | string;
}

export interface DecisionRow {
  id: string;
  candidate: string;
  incumbent: string;
  verdict: StoredDecision['verdict'];
  record: string;
  created_at: number | string;
}

const isoTime = (ms: number | string) => new Date(Number(ms)).toISOString();

export function toRecord(row: PolicyRow): PolicyRecord {
  return {
    version: row.version,
    parent: row.parent,
    runId: row.run_id,
    iteration: row.iteration,
    checkpointUri: row.checkpoint_uri,
    batchContentHash: row.batch_content_hash,
    trainerMetrics: JSON.parse(row.trainer_metrics) as Record<string, unknown>,
    format: row.format,
    baseCheckpointUri: row.base_checkpoint_uri,
    status: row.status,
    createdAt: isoTime(row.created_at),
  };
}

export function toAliasChange(row: AliasChangeRow): AliasChange {
  return {
    id: Number(row.id),
    alias: row.alias,
    from: row.from_version,
    to: row.to_version,
    operation: row.operation,
    actor: row.actor,
    reason: row.reason,
    override: Boolean(row.override),
    decisionId: row.decision_id,
    at: isoTime(row.at),
  };
}

export function toDecision(row: DecisionRow): StoredDecision {
  return {
    id: row.id,
    candidate: row.candidate,
    incumbent: row.incumbent,
    verdict: row.verdict,
    record: JSON.parse(row.record) as Record<string, unknown>,
    createdAt: isoTime(row.created_at),
  };
}
