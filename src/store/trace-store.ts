import type {
  FailureClass,
  NewEvent,
  NewRollout,
  Rollout,
  RolloutEvent,
  RolloutMode,
  RolloutStatus,
  StatusChange,
} from '../rollouts/rollout.js';

/** An event as appendEvent recorded it; `duplicate` when it was the verifier's reward the attempt had already. */
export type AppendedEvent = RolloutEvent & { duplicate?: true };

export type CallEndpoint = 'chat.completions' | 'completions' | 'responses' | 'messages';

/** What the gateway knows when a call arrives, written before it is forwarded. */
export interface CallStart {
  id: string;
  rolloutId: string;
  attempt: number;
  endpoint: CallEndpoint;
  policyVersion: string;
  backendUrl: string;
  stream: boolean;
  requestReceived: unknown;
  requestSent: unknown;
  startedAt: number;
}

export type CallErrorClass =
  | 'upstream_unreachable'
  | 'upstream_timeout'
  | 'upstream_http_error'
  | 'upstream_stream_cut'
  | 'upstream_bad_response'
  | 'client_disconnected'
  | 'gateway_error'
  /** The gateway had no route for the version the rollout is pinned to (or it was paused for a weight update). */
  | 'policy_unavailable'
  /** The gateway process ended while the call was in flight; a later gateway marked it on start. */
  | 'gateway_lost';

/** One choice's trained tokens. */
export interface ChoiceTokens {
  completionIds: number[] | null;
  logprobs: number[] | null;
  finishReason: string | null;
}

export interface CallFinish {
  /** The assembled response as the harness received it, without token-id arrays (kept below). */
  response: unknown;
  promptIds: number[] | null;
  choices: ChoiceTokens[];
  usage: unknown;
  upstreamStatus: number | null;
  errorClass: CallErrorClass | null;
  errorMessage: string | null;
  ttftMs: number | null;
  latencyMs: number;
}

export interface CallRecord extends CallStart, Partial<CallFinish> {
  seq: number;
  status: 'in_flight' | 'ok' | 'error';
  /**
   * The journal's own finding when it stored the prompt: the first `prefixLength` ids equal the
   * start of call `ref`'s prompt + first completion. Lets the sample builder skip re-comparing.
   */
  promptExtends?: { ref: string; prefixLength: number } | null;
}

/**
 * Why a shadow call has no answer: the call errors, plus `gateway_closed` (aborted when the
 * gateway shut down) and `shadow_overloaded` (not sent: too many shadow calls in flight).
 */
export type ShadowErrorClass = Exclude<CallErrorClass, 'client_disconnected'> | 'gateway_closed' | 'shadow_overloaded';

/**
 * A production call's copy sent to a candidate policy (gateway mirror mode). Its answer never
 * reached the harness; it lives apart from the calls, so nothing that reads rollouts' calls
 * (training, samples, failure classification) ever sees it.
 */
export interface ShadowCallRecord {
  id: string;
  /** The production call it copies (whose response is the incumbent's action). */
  primaryCallId: string;
  rolloutId: string;
  attempt: number;
  candidateVersion: string;
  /** The version that answered the production call. */
  incumbentVersion: string;
  endpoint: CallEndpoint;
  backendUrl: string;
  /** The request as sent to the candidate (always non-streamed), redacted. */
  requestSent: unknown;
  /** The candidate's response without token-id arrays, redacted; null when it gave none. */
  response: unknown;
  /**
   * The candidate's completion ids and log-probs, when its backend returns them (prompt ids are the primary call's).
   */
  choices: ChoiceTokens[];
  status: 'ok' | 'error';
  errorClass: ShadowErrorClass | null;
  errorMessage: string | null;
  upstreamStatus: number | null;
  latencyMs: number;
  startedAt: number;
}

export interface ShadowCallFilter {
  candidate?: string;
  rolloutId?: string;
  /** At most this many (all when unset). */
  limit?: number;
  /** The id of the last shadow call of the previous page: continue after it. */
  after?: string;
}

export interface RolloutFilter {
  status?: RolloutStatus;
  mode?: RolloutMode;
  taskId?: string;
  /** The batch the runner issued it in (its metadata's batchId: `<run>.it<n>` for training, `heldout.…` replays). */
  batchId?: string;
  failureClass?: FailureClass;
  /** The version it is pinned to. */
  policyVersion?: string;
  /** Only rollouts whose verifier reward (of the current attempt) is at least / at most this; unscored ones never. */
  minReward?: number;
  maxReward?: number;
  limit?: number;
  /** Opaque cursor from the previous page. */
  after?: string;
}

/** A rollout as a listing shows it: with the verifier's reward of its current attempt, null before one is recorded. */
export type ListedRollout = Rollout & { reward: number | null };

export interface Page<T> {
  items: T[];
  /** Cursor for the next page, or null on the last one. */
  next: string | null;
}

/** Errors a store raises about its input; `status` is the HTTP status the API answers with. */
export class StoreConflictError extends Error {
  readonly status = 409;
  readonly code: string = 'conflict';
}
/** A write for an attempt a newer one superseded (the gateway's own check answers with the same code). */
export class StoreAttemptSupersededError extends StoreConflictError {
  override readonly code = 'attempt_superseded';
}
/** A new attempt asked for a rollout whose current attempt the verifier scored: it is scored once. */
export class StoreAttemptScoredError extends StoreConflictError {
  override readonly code = 'attempt_scored';
}
export class StoreNotFoundError extends Error {
  readonly status = 404;
  readonly code = 'not_found';
}
export class StoreInputError extends Error {
  readonly status = 400;
  readonly code = 'invalid_request';
}

/**
 * The trace store: rollouts, their calls and events. SQLite is the embedded default; a
 * PostgreSQL store implements the same interface for scale.
 *
 * A store may read the values a write is given until the write's promise settles (the SQLite
 * store serializes them when it commits): callers must not change them before.
 */
export interface TraceStore {
  /** Idempotent by id: a second create with the same id returns the existing rollout and created=false. */
  createRollout(input: NewRollout & { id: string }): Promise<{ rollout: Rollout; created: boolean }>;
  getRollout(id: string): Promise<Rollout | undefined>;
  listRollouts(filter?: RolloutFilter): Promise<Page<ListedRollout>>;
  /** Moves a rollout to a new status; an illegal transition throws StoreConflictError. */
  setRolloutStatus(id: string, change: StatusChange, source: RolloutEvent['source']): Promise<Rollout>;
  /** Starts the next attempt of a rollout that has not finished. */
  startAttempt(id: string): Promise<Rollout>;
  /**
   * Runs again a rollout that finished unscored (lost to a fault: see isUnscored) in a new attempt,
   * back to queued; a scored or unfinished rollout throws StoreConflictError. The status event
   * keeps what it was reopened from.
   */
  reopenRollout(id: string, reason: string): Promise<Rollout>;

  /** Durable before it returns; assigns the call's sequence number within its rollout attempt. */
  beginCall(call: CallStart): Promise<{ seq: number }>;
  /** Durable before it returns. */
  finishCall(id: string, result: CallFinish): Promise<void>;
  getCall(id: string): Promise<CallRecord | undefined>;
  /**
   * Ends every call still in flight that began before `before` as `gateway_lost` (an
   * infrastructure error): the gateway that forwarded it is gone, so no answer will be journaled.
   * Returns how many. A gateway calls it as it starts, when it is the store's only gateway.
   */
  markLostCalls(before: number, reason: string): Promise<number>;
  listCalls(rolloutId: string, attempt?: number): Promise<CallRecord[]>;

  /** Durable before it returns; the call's rollout and primary call must be journaled already. */
  recordShadowCall(call: ShadowCallRecord): Promise<void>;
  /** Shadow calls in the order they were recorded; never part of listCalls. */
  listShadowCalls(filter: ShadowCallFilter): Promise<ShadowCallRecord[]>;

  /**
   * Appends an event; a span whose actionId was already recorded is returned, not duplicated. The verifier's reward
   * (type reward, source admin) scores one attempt once: it is refused (StoreAttemptSupersededError) unless `attempt`
   * is the rollout's current one, and a second one for the attempt is not recorded: the first is returned, marked
   * `duplicate`, so racing verifiers all report the reward that stands.
   */
  appendEvent(
    rolloutId: string,
    attempt: number,
    event: NewEvent,
    source: RolloutEvent['source'],
  ): Promise<AppendedEvent>;
  listEvents(rolloutId: string): Promise<RolloutEvent[]>;

  /** Bytes the calls of a rollout take in the store (token blobs and JSON), for reports. */
  rolloutFootprint(rolloutId: string): Promise<{ calls: number; bytes: number }>;
  close(): Promise<void>;
}

/** A rollout as retention sees it: its age, its batch and what it holds in the journal. */
export interface AgedRollout {
  id: string;
  status: RolloutStatus;
  /** The batch the runner made it in (metadata.batchId), if any. */
  batchId: string | null;
  /** When it last changed (finished, for a finished rollout), in ms since the epoch. */
  updatedAt: number;
  calls: number;
  shadowCalls: number;
  events: number;
  /**
   * Bytes of its rows' payloads (requests, responses, token blobs, event payloads): what deleting it frees, as the
   * store can estimate.
   */
  bytes: number;
}

/**
 * What `rein gc` needs of a trace store, apart from TraceStore: the gateway never deletes, so its
 * wrappers (RedactingStore) need not carry these.
 */
export interface JournalRetention {
  /** Rollouts that last changed before `before` (ms), in the order they were created, a page at a time. */
  listAgedRollouts(before: number, page?: { after?: string; limit?: number }): Promise<Page<AgedRollout>>;
  /** Batch ids (metadata.batchId) of rollouts still in use: unfinished, or changed at or after `since`. */
  activeBatchIds(since: number): Promise<string[]>;
  /**
   * Deletes the rollouts among `ids` that, when it runs, are finished and unchanged since before
   * `before`, with their calls, shadow calls, events and call counters, in one transaction (a
   * rollout reopened meanwhile stays). Returns the ids it deleted.
   */
  deleteFinishedRollouts(ids: readonly string[], before: number): Promise<string[]>;
}
