import { ApiRequestError } from '../translation.js';

/** Anthropic's error types (https://docs.anthropic.com/en/api/errors), each for its status. */
const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};
const KNOWN_TYPES = new Set(Object.values(ERROR_TYPES));

/** The Anthropic error type a status answers with (another 4xx: invalid_request_error, 5xx: api_error). */
export function anthropicErrorType(status: number): string {
  return ERROR_TYPES[status] ?? (status < 500 ? 'invalid_request_error' : 'api_error');
}

/**
 * Anthropic's error body. A type that is not one of Anthropic's (a backend's `BadRequestError`)
 * is replaced by the one its status has, so clients keyed on Anthropic's types see theirs.
 */
export function messagesErrorBody(status: number, type: string, message: string) {
  return { type: 'error', error: { type: KNOWN_TYPES.has(type) ? type : anthropicErrorType(status), message } };
}

/** A 400 invalid_request_error: what the Messages request asks that cannot be honored, and the fix. */
export function invalidRequest(message: string): ApiRequestError {
  return new ApiRequestError(400, 'invalid_request_error', message);
}
