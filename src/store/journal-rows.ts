import {
  type newRolloutSchema,
  type FailureClass,
  type Rollout,
  type RolloutEvent,
  type RolloutStatus,
} from '../rollouts/rollout.js';
import { encodeRequest, type ConversationBase } from './request-codec.js';
import { encodePrompt, packNumbers, packSegments } from './token-codec.js';
import {
  StoreConflictError,
  StoreInputError,
  type CallFinish,
  type CallRecord,
  type CallStart,
  type ShadowCallRecord,
} from './trace-store.js';

/**
 * The journal's rows as both databases keep them (SQLite and PostgreSQL use the same columns and
 * types: booleans as 0/1, token ids and log-probs as packed blobs), and what turns calls into rows
 * and back.
 */
export interface RolloutRow {
  seq: number;
  id: string;
  task_id: string | null;
  mode: Rollout['mode'];
  status: RolloutStatus;
  status_reason: string | null;
  attempts: number;
  keyless: number;
  policy_version: string | null;
  failure_class: FailureClass | null;
  metadata: string;
  created_at: number;
  updated_at: number;
}

export interface CallRow {
  id: string;
  rollout_id: string;
  attempt: number;
  seq: number;
  endpoint: CallStart['endpoint'];
  policy_version: string;
  backend_url: string;
  stream: number;
  request_received: string;
  request_sent_patch: string;
  conversation_field: 'messages' | 'input' | null;
  conversation_ref: string | null;
  conversation_prefix: number | null;
  started_at: number;
  status: CallRecord['status'];
  response: string | null;
  prompt_ref: string | null;
  prompt_prefix_length: number | null;
  prompt_suffix: Buffer | null;
  completion_ids: Buffer | null;
  logprobs: Buffer | null;
  finish_reasons: string | null;
  usage: string | null;
  upstream_status: number | null;
  error_class: CallRecord['errorClass'];
  error_message: string | null;
  ttft_ms: number | null;
  latency_ms: number | null;
}

export interface ShadowCallRow {
  seq: number;
  id: string;
  primary_call_id: string;
  rollout_id: string;
  attempt: number;
  candidate_version: string;
  incumbent_version: string;
  endpoint: CallStart['endpoint'];
  backend_url: string;
  request_sent: string;
  conversation_field: 'messages' | 'input' | null;
  conversation_ref: string | null;
  conversation_prefix: number | null;
  response: string | null;
  completion_ids: Buffer | null;
  logprobs: Buffer | null;
  finish_reasons: string | null;
  status: ShadowCallRecord['status'];
  error_class: ShadowCallRecord['errorClass'];
  error_message: string | null;
  upstream_status: number | null;
  latency_ms: number;
  started_at: number;
}

/** Nothing to patch: a shadow call's request is stored as sent. */
export const EMPTY_PATCH = JSON.stringify({ set: {}, unset: [] });

export interface EventRow {
  id: number;
  rollout_id: string;
  attempt: number;
  type: RolloutEvent['type'];
  source: RolloutEvent['source'];
  action_id: string | null;
  payload: string;
  at: number;
  /** The attempt a verifier's (source 'admin') reward scores; unique per rollout (migration 2). Null for others. */
  reward_attempt: number | null;
}

/** The last finished call of each active rollout, whose ids the next prompt most likely extends. */
export const SEQUENCE_CACHE_SIZE = 4096;

/** Keeps the newest entry per rollout, dropping the least recently used past the cache size. */
export function remember<T>(cache: Map<string, T>, rolloutId: string, value: T): void {
  cache.delete(rolloutId);
  cache.set(rolloutId, value);
  if (cache.size > SEQUENCE_CACHE_SIZE) {
    const oldest = cache.keys().next().value;
    if (oldest !== undefined) cache.delete(oldest);
  }
}

/** A deep copy of JSON data, cheap for the small (mostly empty) metadata of a rollout. */
export function copyOfMetadata(metadata: Record<string, unknown>): Record<string, unknown> {
  for (const _key in metadata) return JSON.parse(JSON.stringify(metadata)) as Record<string, unknown>;
  return {};
}

export function toRollout(row: RolloutRow): Rollout {
  return {
    id: row.id,
    taskId: row.task_id,
    mode: row.mode,
    status: row.status,
    statusReason: row.status_reason,
    attempts: row.attempts,
    keyless: row.keyless === 1,
    policyVersion: row.policy_version,
    failureClass: row.failure_class,
    metadata: JSON.parse(row.metadata) as Record<string, unknown>,
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
  };
}

export function toEvent(row: EventRow): RolloutEvent {
  return {
    id: row.id,
    rolloutId: row.rollout_id,
    attempt: row.attempt,
    type: row.type,
    source: row.source,
    actionId: row.action_id,
    payload: JSON.parse(row.payload) as Record<string, unknown>,
    at: new Date(row.at).toISOString(),
  };
}

export function encodeCursor(seq: number): string {
  return Buffer.from(`r${seq}`).toString('base64url');
}

export function decodeCursor(cursor: string): number {
  const text = Buffer.from(cursor, 'base64url').toString();
  const seq = Number(text.slice(1));
  if (!text.startsWith('r') || !Number.isInteger(seq)) throw new StoreInputError(`invalid page cursor "${cursor}"`);
  return seq;
}

/**
 * Creating a rollout that exists is a retry only if it asks for the same rollout: the same id with
 * another task, mode, keylessness or pinned version would otherwise get the old rollout back as
 * if it were what was asked for. Metadata describes a rollout and the first write keeps it: a
 * runner of a newer Rein that resumes a batch may describe its rollouts differently.
 */
export function refuseOtherBody(existing: Rollout, asked: ReturnType<typeof newRolloutSchema.parse>): void {
  const fields = {
    taskId: [existing.taskId, asked.taskId ?? null],
    mode: [existing.mode, asked.mode],
    keyless: [existing.keyless, asked.keyless],
    policyVersion: [existing.policyVersion, asked.policyVersion ?? null],
  } as const;
  const differing = Object.entries(fields).filter(([, [was, now]]) => was !== now);
  if (differing.length === 0) return;
  const said = differing.map(([name, [was, now]]) => `${name} (${JSON.stringify(was)}, not ${JSON.stringify(now)})`);
  throw new StoreConflictError(
    `rollout ${existing.id} exists with another ${said.join(', ')}; send the same body to retry, or use a new id`,
  );
}

/** A call's prompt ids + first completion, as the next prompt of its rollout most likely extends them. */
export type SequenceBase = { callId: string; ids: number[] };

/** The row a call is begun with (no seq: the store assigns it), and the conversation it leaves for the next call. */
export function beginCallRow(call: CallStart, conversationBefore: ConversationBase | undefined) {
  const request = encodeRequest(
    call.requestReceived as Record<string, unknown>,
    call.requestSent as Record<string, unknown>,
    conversationBefore,
  );
  const row = {
    id: call.id,
    rollout_id: call.rolloutId,
    attempt: call.attempt,
    endpoint: call.endpoint,
    policy_version: call.policyVersion,
    backend_url: call.backendUrl,
    stream: call.stream ? 1 : 0,
    request_received: request.received,
    request_sent_patch: request.sentPatch,
    conversation_field: request.conversation?.field ?? null,
    conversation_ref: request.conversation?.ref ?? null,
    conversation_prefix: request.conversation?.prefix ?? null,
    started_at: call.startedAt,
  };
  return { row, conversation: request.items ? { callId: call.id, items: request.items } : undefined };
}

/** The columns a call's result sets, its prompt stored as a delta over `sequenceBefore`; and the sequence it leaves. */
export function finishCallRow(id: string, result: CallFinish, sequenceBefore: SequenceBase | undefined) {
  const delta = result.promptIds ? encodePrompt(result.promptIds, sequenceBefore) : null;
  const hasTokens = result.choices.some((c) => c.completionIds !== null);
  const hasLogprobs = result.choices.some((c) => c.logprobs !== null);
  const row = {
    id,
    status: result.errorClass ? 'error' : 'ok',
    response: result.response === undefined ? null : JSON.stringify(result.response),
    prompt_ref: delta?.ref ?? null,
    prompt_prefix_length: delta?.prefixLength ?? null,
    prompt_suffix: delta ? packNumbers(delta.suffix, 'i32') : null,
    completion_ids: hasTokens
      ? packSegments(
          result.choices.map((c) => c.completionIds),
          'i32',
        )
      : null,
    logprobs: hasLogprobs
      ? packSegments(
          result.choices.map((c) => c.logprobs),
          'f32',
        )
      : null,
    finish_reasons: JSON.stringify(result.choices.map((c) => c.finishReason)),
    usage: result.usage === undefined || result.usage === null ? null : JSON.stringify(result.usage),
    upstream_status: result.upstreamStatus,
    error_class: result.errorClass,
    error_message: result.errorMessage,
    ttft_ms: result.ttftMs,
    latency_ms: result.latencyMs,
  };
  const sequence = result.promptIds
    ? { callId: id, ids: [...result.promptIds, ...(result.choices[0]?.completionIds ?? [])] }
    : undefined;
  return { row, sequence };
}

/** A shadow call's row; its conversation is the primary call's, stored as a reference to the rollout's latest call. */
export function shadowCallRow(call: ShadowCallRecord, conversationBefore: ConversationBase | undefined) {
  const sent = call.requestSent as Record<string, unknown>;
  const request = encodeRequest(sent, sent, conversationBefore);
  const hasTokens = call.choices.some((c) => c.completionIds !== null);
  const hasLogprobs = call.choices.some((c) => c.logprobs !== null);
  return {
    id: call.id,
    primary_call_id: call.primaryCallId,
    rollout_id: call.rolloutId,
    attempt: call.attempt,
    candidate_version: call.candidateVersion,
    incumbent_version: call.incumbentVersion,
    endpoint: call.endpoint,
    backend_url: call.backendUrl,
    request_sent: request.received,
    conversation_field: request.conversation?.field ?? null,
    conversation_ref: request.conversation?.ref ?? null,
    conversation_prefix: request.conversation?.prefix ?? null,
    response: call.response === null || call.response === undefined ? null : JSON.stringify(call.response),
    completion_ids: hasTokens
      ? packSegments(
          call.choices.map((c) => c.completionIds),
          'i32',
        )
      : null,
    logprobs: hasLogprobs
      ? packSegments(
          call.choices.map((c) => c.logprobs),
          'f32',
        )
      : null,
    finish_reasons: JSON.stringify(call.choices.map((c) => c.finishReason)),
    status: call.status,
    error_class: call.errorClass,
    error_message: call.errorMessage,
    upstream_status: call.upstreamStatus,
    latency_ms: call.latencyMs,
    started_at: call.startedAt,
  };
}

/** The statuses a rollout ends in (see isFinished). */
export const FINISHED_STATUSES: readonly RolloutStatus[] = ['succeeded', 'failed', 'cancelled'];
