import { aliasesNamedLikeVersions, routingNameProblem } from './routing-names.js';
import type { CallEndpoint } from '../store/trace-store.js';

/* The gateway's routing table: its shapes, and the rules a table must keep before a router serves it. */

export interface BackendSpec {
  /** Base URLs of the OpenAI-compatible server(s), each ending in /v1. */
  endpoints: string[];
  apiKey?: string | undefined;
  /** Ask for token ids (vLLM ≥ 0.10.2 `return_token_ids`). */
  tokenIds: boolean;
  /** Ask for the sampled tokens' log-probs. */
  logprobs: boolean;
  /** APIs sent to this backend as the harness sent them, not translated to chat completions. */
  nativeApis?: CallEndpoint[] | undefined;
  /** The backend takes chat prompts as token ids (see gateway.backends.*.tokenIn). */
  tokenIn?: TokenInSpec | undefined;
  /** Calls in flight at most across all gateways, and the longest a call queues for one (see BackendLimits). */
  limit?: { maxInFlight: number; maxQueueWaitMs: number } | undefined;
}

export interface TokenInSpec {
  tokenizerDir: string;
  field: 'prompt_token_ids' | 'kv_transfer_params';
}

export interface PolicySpec {
  backend: string;
  /** The model name the backend serves this policy version under. */
  model: string;
}

export interface RoutingTable {
  backends: Record<string, BackendSpec>;
  /** Policy version → where it is served. */
  policies: Record<string, PolicySpec>;
  /** Model alias a harness asks for (e.g. "production") → policy version. */
  aliases: Record<string, string>;
  /**
   * Alias → candidate policy version whose answers to the alias's calls are recorded as shadow
   * calls (never returned). The candidate may be the alias's own version: the shadow then
   * measures how often the policy disagrees with itself, the noise floor for other candidates.
   */
  mirrors?: Record<string, { candidate: string; sampleRate: number }>;
  /**
   * The alias or version that serves an unpinned call naming a model the table does not know (harnesses that
   * hard-code a vendor's name). Unset: such a call gets a 404 listing the names served.
   */
  defaultModel?: string | undefined;
}

export class RoutingError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** A table entry the table itself holds: a name like "constructor" must not find Object's. */
export function own<T>(record: Record<string, T> | undefined, name: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, name) ? record[name] : undefined;
}

/** The names a harness may ask for, aliases first; a long list is cut (GET /v1/models has them all). */
export function servedNames(table: RoutingTable): string {
  const names = [...Object.keys(table.aliases), ...Object.keys(table.policies)];
  if (names.length === 0) return 'Nothing is served here yet';
  const shown = names.slice(0, SERVED_NAMES_SHOWN).join(', ');
  const more = names.length - SERVED_NAMES_SHOWN;
  return `Names served here: ${shown}${more > 0 ? ` and ${more} more (GET /v1/models lists them)` : ''}`;
}
const SERVED_NAMES_SHOWN = 20;

export function validateTable(table: RoutingTable): void {
  // Names first, and on their own: a name that cannot be used is the caller's one mistake.
  const badNames = [
    ...Object.keys(table.backends).map((name) => ['backend', name]),
    ...Object.keys(table.policies).map((name) => ['policy version', name]),
    ...Object.keys(table.aliases).map((name) => ['alias', name]),
    ...(table.defaultModel === undefined ? [] : [['default model', table.defaultModel]]),
  ].flatMap(([kind, name]) => {
    const problem = routingNameProblem(name as string);
    return problem ? [`${kind} ${problem}`] : [];
  });
  if (badNames.length) throw new RoutingError(badNames.join('; '), 400, 'invalid_name');
  const problems: string[] = [];
  for (const [name, backend] of Object.entries(table.backends)) {
    if (backend.endpoints.length === 0) problems.push(`backend ${name} has no endpoints`);
  }
  for (const [version, policy] of Object.entries(table.policies)) {
    if (!own(table.backends, policy.backend))
      problems.push(`policy ${version} names unknown backend ${policy.backend}`);
  }
  for (const [alias, version] of Object.entries(table.aliases)) {
    if (!own(table.policies, version)) problems.push(`alias ${alias} points at unknown policy ${version}`);
  }
  for (const name of aliasesNamedLikeVersions(table.policies, table.aliases))
    problems.push(`${name} is both an alias and a policy version: a model name means one thing, rename one`);
  for (const [alias, { candidate }] of Object.entries(table.mirrors ?? {})) {
    if (!Object.hasOwn(table.aliases, alias))
      problems.push(`mirror of alias ${alias}, which does not exist (clear it first: DELETE /api/mirrors/${alias})`);
    if (!own(table.policies, candidate)) problems.push(`alias ${alias} is mirrored to unknown policy ${candidate}`);
  }
  if (problems.length)
    throw new RoutingError(`invalid gateway routing: ${problems.join('; ')}`, 400, 'invalid_routing');
}
