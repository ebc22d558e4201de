import type { IncomingHttpHeaders } from 'node:http';
import type { CallEndpoint } from '../store/trace-store.js';
import type { RequestBody } from './openai-types.js';

/** One model call a harness made, as the proxy forwards it. */
export interface ProxiedCall {
  rolloutId: string;
  attempt: number;
  endpoint: CallEndpoint;
  body: RequestBody;
  /** The body as the harness sent it: the backend gets these bytes, with only the gateway's additions made. */
  text: string;
  /** The harness's request headers; those that are not about this hop or the harness's key reach the backend. */
  headers: IncomingHttpHeaders;
  /** The policy version the rollout is pinned to, if any (then the requested model only has to exist). */
  pinnedPolicyVersion?: string | null;
  /** The rollout's run merges samples token in (`samples.merge: tito`): continued chat prompts go as token ids. */
  tokenIn?: boolean;
  /** Aborted when the harness goes away. */
  signal: AbortSignal;
}
