import { decodeRequest } from './request-codec.js';
import type { CallRow, ShadowCallRow } from './journal-rows.js';
import { EMPTY_PATCH } from './journal-rows.js';
import { decodePrompt, unpackNumbers, unpackSegments } from './token-codec.js';
import type { CallRecord, ShadowCallRecord } from './trace-store.js';

/**
 * Rebuilds calls from their delta-encoded rows, following references to earlier calls of the
 * same rollout; memoised, so decoding a whole rollout is linear in its size.
 */
export class JournalDecoder {
  private readonly sequences = new Map<string, number[]>();
  private readonly conversations = new Map<
    string,
    { received: Record<string, unknown>; sent: Record<string, unknown>; items: string[] | null }
  >();

  constructor(private readonly load: (id: string) => CallRow | undefined) {}

  /** A call's prompt ids followed by its first choice's completion ids. */
  sequence(id: string): number[] {
    const known = this.sequences.get(id);
    if (known) return known;
    const row = this.row(id);
    const ids = [...this.promptIds(row), ...(completionsOf(row)[0] ?? [])];
    this.sequences.set(id, ids);
    return ids;
  }

  conversation(id: string): string[] {
    return this.request(this.row(id)).items ?? [];
  }

  /** A shadow call's request, whose conversation refers to the calls this decoder reads. */
  shadowRequest(row: ShadowCallRow): Record<string, unknown> {
    const conversation = row.conversation_field
      ? { field: row.conversation_field, ref: row.conversation_ref, prefix: row.conversation_prefix ?? 0 }
      : null;
    return decodeRequest({ received: row.request_sent, sentPatch: EMPTY_PATCH, conversation }, (ref) =>
      this.conversation(ref),
    ).sent;
  }

  record(row: CallRow): CallRecord {
    const request = this.request(row);
    const record: CallRecord = {
      id: row.id,
      rolloutId: row.rollout_id,
      attempt: row.attempt,
      seq: row.seq,
      endpoint: row.endpoint,
      policyVersion: row.policy_version,
      backendUrl: row.backend_url,
      stream: row.stream === 1,
      requestReceived: request.received,
      requestSent: request.sent,
      startedAt: row.started_at,
      status: row.status,
    };
    if (row.status === 'in_flight') return record;
    const completions = completionsOf(row);
    const logprobs = row.logprobs ? unpackSegments(row.logprobs, 'f32') : [];
    const finishReasons = JSON.parse(row.finish_reasons ?? '[]') as Array<string | null>;
    return {
      ...record,
      response: row.response === null ? undefined : JSON.parse(row.response),
      promptIds: row.prompt_suffix ? this.promptIds(row) : null,
      promptExtends: row.prompt_ref ? { ref: row.prompt_ref, prefixLength: row.prompt_prefix_length ?? 0 } : null,
      choices: finishReasons.map((finishReason, i) => ({
        completionIds: completions[i] ?? null,
        logprobs: logprobs[i] ?? null,
        finishReason,
      })),
      usage: row.usage === null ? null : JSON.parse(row.usage),
      upstreamStatus: row.upstream_status,
      errorClass: row.error_class,
      errorMessage: row.error_message,
      ttftMs: row.ttft_ms,
      latencyMs: row.latency_ms ?? 0,
    };
  }

  private promptIds(row: CallRow): number[] {
    if (!row.prompt_suffix) return [];
    return decodePrompt(
      {
        ref: row.prompt_ref,
        prefixLength: row.prompt_prefix_length ?? 0,
        suffix: unpackNumbers(row.prompt_suffix, 'i32'),
      },
      (ref) => this.sequence(ref),
    );
  }

  private request(row: CallRow) {
    const known = this.conversations.get(row.id);
    if (known) return known;
    const decoded = decodeRequest(
      {
        received: row.request_received,
        sentPatch: row.request_sent_patch,
        conversation: row.conversation_field
          ? { field: row.conversation_field, ref: row.conversation_ref, prefix: row.conversation_prefix ?? 0 }
          : null,
      },
      (ref) => this.conversation(ref),
    );
    this.conversations.set(row.id, decoded);
    return decoded;
  }

  private row(id: string): CallRow {
    const row = this.load(id);
    if (!row) throw new Error(`journal corrupt: referenced call ${id} is missing`);
    return row;
  }
}

export function completionsOf(row: CallRow): Array<number[] | null> {
  return row.completion_ids ? unpackSegments(row.completion_ids, 'i32') : [];
}

export function toShadowCall(row: ShadowCallRow, decoder: JournalDecoder): ShadowCallRecord {
  const completions = row.completion_ids ? unpackSegments(row.completion_ids, 'i32') : [];
  const logprobs = row.logprobs ? unpackSegments(row.logprobs, 'f32') : [];
  const finishReasons = JSON.parse(row.finish_reasons ?? '[]') as Array<string | null>;
  return {
    id: row.id,
    primaryCallId: row.primary_call_id,
    rolloutId: row.rollout_id,
    attempt: row.attempt,
    candidateVersion: row.candidate_version,
    incumbentVersion: row.incumbent_version,
    endpoint: row.endpoint,
    backendUrl: row.backend_url,
    requestSent: decoder.shadowRequest(row),
    response: row.response === null ? null : JSON.parse(row.response),
    choices: finishReasons.map((finishReason, i) => ({
      completionIds: completions[i] ?? null,
      logprobs: logprobs[i] ?? null,
      finishReason,
    })),
    status: row.status,
    errorClass: row.error_class,
    errorMessage: row.error_message,
    upstreamStatus: row.upstream_status,
    latencyMs: row.latency_ms,
    startedAt: row.started_at,
  };
}
