import type { FastifyReply } from 'fastify';
import { ForbiddenKeyError } from '../http/json-body-refusal.js';
import { ZodError } from 'zod';
import { PromotionConflictError, RunExistsError, RunNotFoundError, RunNotResumableError } from '../client/runs.js';
import { ScheduleError } from '../client/schedule-error.js';
import { ConfigError } from '../config/load.js';
import { RunConfigError, RunConfigNotStoredError } from '../config/run-config.js';
import { RunCursorError } from '../console/run-rollouts.js';
import { TokenViewNotFoundError } from '../console/token-view.js';
import { UpdateLogNotFoundError } from '../console/update-log.js';
import { GatewayRequestError } from '../gateway/control-client.js';
import { PromotionError } from '../registry/promotion.js';

/** The API's requests are small settings objects. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
/**
 * Deeper than any request of the API, shallow enough that nothing recursive (validation, error messages) can overflow.
 */
export const MAX_BODY_DEPTH = 32;

/** A refusal with its HTTP status and Rein's error code, answered as `{"error": {"code", "message"}}`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function sendError(reply: FastifyReply, err: unknown): void {
  const { status, code, message } = describeError(err);
  void reply.code(status).send({ error: { code, message } });
}

export function describeError(err: unknown): { status: number; code: string; message: string } {
  if (err instanceof ApiError) return err;
  if (err instanceof RunNotFoundError) return { status: 404, code: 'run_not_found', message: err.message };
  if (err instanceof RunExistsError) return { status: 409, code: 'run_exists', message: err.message };
  if (err instanceof PromotionConflictError) return { status: 409, code: 'promotion_conflict', message: err.message };
  if (err instanceof RunNotResumableError) return { status: 409, code: 'run_not_resumable', message: err.message };
  if (err instanceof ScheduleError)
    return {
      status: /^no schedule/.test(err.message) ? 404 : /already exists/.test(err.message) ? 409 : 400,
      code: 'schedule',
      message: err.message,
    };
  if (err instanceof PromotionError)
    return {
      status: /not registered|no gate decision/.test(err.message) ? 404 : 409,
      code: 'promotion_refused',
      message: err.message,
    };
  if (err instanceof ConfigError) return { status: 400, code: 'config', message: err.message };
  if (err instanceof RunConfigNotStoredError) return { status: 404, code: 'config_not_stored', message: err.message };
  if (err instanceof RunConfigError) return { status: 409, code: 'config_unusable', message: err.message };
  if (err instanceof RunCursorError) return { status: 400, code: 'invalid_cursor', message: err.message };
  if (err instanceof TokenViewNotFoundError) return { status: 404, code: 'tokens_not_found', message: err.message };
  if (err instanceof UpdateLogNotFoundError) return { status: 404, code: 'log_not_found', message: err.message };
  if (err instanceof ForbiddenKeyError) return { status: 400, code: 'forbidden_key', message: err.message };
  // The console's rollouts come from the gateway: its refusals of the caller's input are the caller's (404 an unknown
  // rollout), a gateway down or failing is a 502.
  if (err instanceof GatewayRequestError) {
    if (err.status === 404) return { status: 404, code: 'rollout_not_found', message: err.message };
    return err.status >= 400 && err.status < 500
      ? { status: err.status, code: err.code, message: err.message }
      : { status: 502, code: err.code, message: err.message };
  }
  if (err instanceof ZodError)
    return { status: 400, code: 'invalid_request', message: err.issues.map((i) => i.message).join('; ') };
  return describeFrameworkError(err);
}

/** Fastify's own refusals: the caller's mistake, so its 4xx, named and explained; anything else is ours. */
function describeFrameworkError(err: unknown): { status: number; code: string; message: string } {
  const e = err as { statusCode?: number; code?: string; message?: string };
  if (e.code === 'FST_ERR_BAD_URL')
    return {
      status: 400,
      code: 'invalid_request',
      message: `${e.message ?? 'the URL is not valid'}: a path segment has broken percent-encoding; encode it with encodeURIComponent`,
    };
  if (e.code === 'FST_ERR_MAX_PARAM_LENGTH')
    return {
      status: 414,
      code: 'uri_too_long',
      message: 'a path parameter (run, schedule, version or decision id) is over 100 characters; no id is that long',
    };
  // An answer that does not match its route's response schema: a bug of the API, told with the schema's complaint.
  if (e.code === 'FST_ERR_RESPONSE_SERIALIZATION')
    return {
      status: 500,
      code: 'internal',
      message: `the answer does not match the API's schema: ${String((err as Error).cause)}`,
    };
  if (e.statusCode === 413)
    return {
      status: 413,
      code: 'body_too_large',
      message: `the request body is over the API's limit of ${BODY_LIMIT_BYTES / 1024 / 1024} MiB`,
    };
  if (e.statusCode === 415)
    return {
      status: 415,
      code: 'unsupported_media_type',
      message: 'send the body as JSON, with content-type: application/json',
    };
  if (e.statusCode !== undefined && e.statusCode >= 400 && e.statusCode < 500)
    return { status: e.statusCode, code: 'invalid_request', message: e.message ?? 'bad request' };
  return { status: 500, code: 'internal', message: e.message ?? String(err) };
}
