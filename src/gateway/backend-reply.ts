import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { errors as undiciErrors } from 'undici';
import type { CallEndpoint, CallErrorClass, CallFinish } from '../store/trace-store.js';
import { GatewayHttpError } from './errors.js';
import { MAX_JSON_DEPTH, nestedDeeperThan } from './json-text.js';
import { responseProblem } from './openai-shapes.js';
import type { JsonObject, RequestBody } from './openai-types.js';
import { redact, type RedactionRule } from './redact.js';
import type { Route } from './routing.js';

/** What the gateway does with a backend's reply besides relaying it: read it, journal it, say what went wrong. */

/** Response headers that belong to the hop from the backend (or that the gateway sets itself). */
const NOT_RELAYED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
]);

/**
 * Journals a call's outcome (ModelCallProxy.forward): the fields not given are those of a call that got no response.
 */
export type Finish = (result: Partial<CallFinish> & Pick<CallFinish, 'upstreamStatus'>) => Promise<void>;

/**
 * The request as sent, for the journal: the values it shares with the received one are the same (already redacted)
 * objects.
 */
export function journalShare(
  sent: RequestBody,
  received: RequestBody,
  receivedForJournal: JsonObject,
  redaction: readonly RedactionRule[],
): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(sent)) {
    const shared = value === received[key] ? receivedForJournal[key] : redact(value, redaction);
    // As a data property, so that even a key named __proto__ stays a plain key.
    Object.defineProperty(out, key, { value: shared, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * The backend's response headers for the harness, less those of the hop (and content-length, which the body being sent
 * sets).
 */
export function relayedHeaders(headers: IncomingHttpHeaders, contentLength?: number): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !NOT_RELAYED.has(name)) out[name] = value;
  }
  if (contentLength !== undefined) out['content-length'] = contentLength;
  return out;
}

/** A JSON object, or undefined for anything else (including nesting deeper than the gateway walks). */
export function parseJson(text: string): JsonObject | undefined {
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as JsonObject) : undefined;
  } catch {
    return undefined;
  }
}

/** The message of a backend's error body (OpenAI's / vLLM's shape), if it has one. */
export function backendMessage(text: string): string | undefined {
  const body = parseJson(text);
  const error = body?.error;
  if (error !== null && typeof error === 'object' && typeof (error as JsonObject).message === 'string')
    return (error as JsonObject).message as string;
  return typeof body?.message === 'string' ? body.message : undefined;
}

/** The longest backend reason a journaled error message keeps (the response itself is journaled whole). */
const BACKEND_REASON_MAX = 400;

/**
 * A journaled error message for a backend's error answer: its status and its own words (its error message, else the
 * start of its text), cut to a sane length, so the cause shows without opening the raw response.
 */
export function backendRefusal(status: number, text: string, who = 'the backend'): string {
  const words = (backendMessage(text) ?? text).replace(/\s+/g, ' ').trim();
  if (!words) return `${who} answered ${status}`;
  const cut = words.length > BACKEND_REASON_MAX ? `${words.slice(0, BACKEND_REASON_MAX)}…` : words;
  return `${who} answered ${status}: ${cut}`;
}

/** A backend's whole (non-streamed) answer to `endpoint` as the gateway reads it, or why it cannot. */
export function readReply(
  endpoint: CallEndpoint,
  text: string,
): { response: JsonObject; problem: null } | { response: undefined; problem: string } {
  const response = parseJson(text);
  if (!response) {
    return {
      response,
      problem: `${text.length} bytes that are not a JSON object (of at most ${MAX_JSON_DEPTH} levels)`,
    };
  }
  const problem = responseProblem(endpoint, response);
  return problem === null ? { response, problem } : { response: undefined, problem };
}

export function badResponse(route: Route): GatewayHttpError {
  return new GatewayHttpError(
    502,
    'upstream_bad_response',
    `backend ${route.backendName} returned a response the gateway cannot read; the call's journal entry says why`,
  );
}

/**
 * Why the backend exchange failed: the journal gets the details, the harness a message that
 * names the backend by its configured name only (its address and the exception are internals).
 */
export function classify(
  err: unknown,
  signal: AbortSignal,
  afterHeaders: boolean,
): { errorClass: CallErrorClass; message: string; httpError: (route: Route) => GatewayHttpError } {
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  if (signal.aborted) {
    return {
      errorClass: 'client_disconnected',
      message: 'the harness closed the connection',
      httpError: () => new GatewayHttpError(499, 'client_disconnected', 'client went away'),
    };
  }
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return {
      errorClass: 'upstream_timeout',
      message,
      httpError: (route) =>
        new GatewayHttpError(504, 'upstream_timeout', `backend ${route.backendName} did not answer in time`),
    };
  }
  return {
    errorClass: afterHeaders ? 'upstream_stream_cut' : 'upstream_unreachable',
    message,
    httpError: (route) =>
      new GatewayHttpError(
        502,
        afterHeaders ? 'upstream_stream_cut' : 'upstream_unreachable',
        `backend ${route.backendName} ${afterHeaders ? 'broke off its response' : 'is unreachable'}`,
      ),
  };
}
