import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ZodError } from 'zod';
import { clientErrorAnswer } from '../http/client-error.js';
import type { Logger } from '../log/logger.js';
import { translationOf } from '../apis/registry.js';
import { ApiRequestError, type ApiTranslation } from '../apis/translation.js';
import { RoutingError } from './routing.js';

/** An error the harness receives as an OpenAI-style error body. */
export class GatewayHttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A failure of the gateway itself while it handled a journaled call: the call id leads to its journal row. */
export class GatewayCallError extends Error {
  constructor(
    readonly callId: string,
    cause: unknown,
  ) {
    super(`call ${callId} failed in the gateway: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** The OpenAI error shape every refusal of the gateway answers with. */
export interface ErrorBody {
  error: { message: string; type: string; code: string | number | null; param: null };
}

export function errorBody(status: number, code: string, message: string): ErrorBody {
  // An unknown model is answered as the backend (vLLM) answers it, so a harness handles it the same.
  if (code === 'model_not_found') return { error: { message, type: 'NotFoundError', param: null, code: 404 } };
  const type = status >= 500 ? 'api_error' : 'invalid_request_error';
  // A translation's refusal names only its type: no code, as the embedded server's Responses API answers it.
  return { error: { message, type, code: code === type ? null : code, param: null } };
}

/**
 * The error body in the shape of the API the request called: Anthropic's for the Messages API
 * (its SDKs read `error.type`), OpenAI's for every other.
 */
export function errorBodyFor(url: string, status: number, code: string, message: string): object {
  if (!MESSAGES_PATH.test(url.split('?')[0] ?? '')) return errorBody(status, code, message);
  return (translationOf('messages') as ApiTranslation).errorBody(status, apiErrorType(status), message);
}

const MESSAGES_PATH = /\/v1\/messages\/?$/;

/** A status's error type in the words of the Responses and Messages APIs. */
export function apiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}

/** Whether an error described by describeError is the gateway's own failure (logged, answered without internals). */
export function isGatewayFailure(described: { status: number; code: string }): boolean {
  return described.status >= 500 && described.code === 'gateway_error';
}

export function describeError(err: unknown): {
  status: number;
  code: string;
  message: string;
  headers: Record<string, string>;
} {
  if (err instanceof GatewayHttpError)
    return { status: err.status, code: err.code, message: err.message, headers: err.headers };
  if (err instanceof ApiRequestError) return { status: err.status, code: err.type, message: err.message, headers: {} };
  if (err instanceof RoutingError) {
    return {
      status: err.status,
      code: err.code,
      message: err.message,
      headers: err.retryAfterSeconds === undefined ? {} : { 'retry-after': String(err.retryAfterSeconds) },
    };
  }
  if (err instanceof ZodError) {
    const problems = err.issues.map((i) => `${i.path.length ? i.path.join('.') : '(body)'}: ${i.message}`);
    return { status: 400, code: 'invalid_request', message: `invalid request: ${problems.join('; ')}`, headers: {} };
  }
  const e = err as { statusCode?: number; status?: number; code?: string; message?: string };
  const status = e.statusCode ?? e.status;
  if (e.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || (err instanceof SyntaxError && status === 400)) {
    return {
      status: 400,
      code: 'malformed_json',
      message: `malformed JSON body (${e.message ?? 'parse error'}); send one JSON object`,
      headers: {},
    };
  }
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return {
      status: 413,
      code: 'body_too_large',
      message: `request body too large; the gateway's limit is gateway.bodyLimitBytes`,
      headers: {},
    };
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, code: e.code ?? 'bad_request', message: e.message ?? 'bad request', headers: {} };
  }
  if (e.code === 'FST_ERR_MAX_PARAM_LENGTH')
    return { status: 414, code: 'uri_too_long', message: 'a part of the URL is too long', headers: {} };
  if (e.code === 'FST_ERR_BAD_URL')
    return { status: 400, code: 'bad_url', message: 'the URL is not valid (it does not decode)', headers: {} };
  // The details are in the gateway's log, not in the answer: they are internals.
  return {
    status: 500,
    code: 'gateway_error',
    message: 'the gateway failed to handle the request; its log has the details',
    headers: {},
  };
}

/** A failure of the gateway itself: logged with what leads to it (its call, if journaled); returns that call's id. */
export function logGatewayFailure(
  log: Logger,
  err: unknown,
  req: { method: string; url: string },
  res: ServerResponse,
): string | undefined {
  const callId = err instanceof GatewayCallError ? err.callId : (res.getHeader('x-rein-call-id') as string | undefined);
  log.error({ err, callId, method: req.method, url: req.url }, 'gateway error');
  return callId;
}

/** For hijacked proxy replies: an error before any byte went out becomes an OpenAI error body. */
export function sendRawError(res: ServerResponse, err: unknown, url: string, callId?: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, code, message, headers } = describeError(err);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(
    JSON.stringify(errorBodyFor(url, status, code, callId === undefined ? message : `${message} (call ${callId})`)),
  );
}

/** How long a request may take to arrive, and Rein's error shape for what fails before a route. */
export function connectionOptions(requestTimeoutMs: number) {
  return {
    requestTimeout: requestTimeoutMs,
    // Node checks for timed-out requests this often (its default, 30 s, would let a short limit run long).
    http: {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(60_000, requestTimeoutMs),
      connectionsCheckingInterval: Math.min(1000, requestTimeoutMs),
    },
    clientErrorHandler: clientErrorAnswer({ body: errorBody, timeoutSetting: 'gateway.requestTimeoutMs' }),
    frameworkErrors: (err: Error, req: FastifyRequest, reply: FastifyReply) => {
      const { status, code, message } = describeError(err);
      void reply.code(status).send(errorBodyFor(req.url, status, code, message));
    },
  };
}
