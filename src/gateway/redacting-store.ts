import type { NewEvent, NewRollout, RolloutEvent, StatusChange } from '../rollouts/rollout.js';
import type { CallFinish, CallStart, ShadowCallRecord, TraceStore } from '../store/trace-store.js';
import { redact, type RedactionRule } from './redact.js';

/**
 * The journal as the gateway writes it: every text that enters it through the control API
 * (rollout metadata, status reasons and evidence such as a crashed harness's log tail, reopen
 * reasons, events) and every call's error message is redacted on the way in. Call bodies are
 * redacted by the proxy, which also withholds the token ids of what it redacted (withoutSecretIds);
 * redacting them again here would only cost time.
 */
export class RedactingStore implements TraceStore {
  constructor(
    private readonly store: TraceStore,
    private readonly rules: readonly RedactionRule[],
  ) {}

  private clean<T>(value: T): T {
    return redact(value, this.rules);
  }

  createRollout(input: NewRollout & { id: string }) {
    return this.store.createRollout(
      input.metadata === undefined ? input : { ...input, metadata: this.clean(input.metadata) },
    );
  }
  setRolloutStatus(id: string, change: StatusChange, source: RolloutEvent['source']) {
    return this.store.setRolloutStatus(id, this.clean(change), source);
  }
  reopenRollout(id: string, reason: string) {
    return this.store.reopenRollout(id, this.clean(reason));
  }
  appendEvent(rolloutId: string, attempt: number, event: NewEvent, source: RolloutEvent['source']) {
    return this.store.appendEvent(rolloutId, attempt, this.clean(event), source);
  }
  markLostCalls(before: number, reason: string) {
    return this.store.markLostCalls(before, this.clean(reason));
  }
  beginCall(call: CallStart) {
    return this.store.beginCall(call);
  }
  finishCall(id: string, result: CallFinish) {
    return this.store.finishCall(
      id,
      result.errorMessage === null ? result : { ...result, errorMessage: this.clean(result.errorMessage) },
    );
  }
  recordShadowCall(call: ShadowCallRecord) {
    return this.store.recordShadowCall(
      call.errorMessage === null ? call : { ...call, errorMessage: this.clean(call.errorMessage) },
    );
  }

  // Reads and writes that carry no text.
  getRollout(...args: Parameters<TraceStore['getRollout']>) {
    return this.store.getRollout(...args);
  }
  listRollouts(...args: Parameters<TraceStore['listRollouts']>) {
    return this.store.listRollouts(...args);
  }
  startAttempt(...args: Parameters<TraceStore['startAttempt']>) {
    return this.store.startAttempt(...args);
  }
  getCall(...args: Parameters<TraceStore['getCall']>) {
    return this.store.getCall(...args);
  }
  listCalls(...args: Parameters<TraceStore['listCalls']>) {
    return this.store.listCalls(...args);
  }
  listShadowCalls(...args: Parameters<TraceStore['listShadowCalls']>) {
    return this.store.listShadowCalls(...args);
  }
  listEvents(...args: Parameters<TraceStore['listEvents']>) {
    return this.store.listEvents(...args);
  }
  rolloutFootprint(...args: Parameters<TraceStore['rolloutFootprint']>) {
    return this.store.rolloutFootprint(...args);
  }
  close() {
    return this.store.close();
  }
}
