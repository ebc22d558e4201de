import { translationOf } from '../apis/registry.js';
import type { ApiTranslation } from '../apis/translation.js';
import type { CallEndpoint } from '../store/trace-store.js';
import type { RequestBody } from './openai-types.js';
import type { ProxiedCall } from './proxied-call.js';
import type { ResponseChains } from './response-chains.js';
import type { BackendSpec } from './routing.js';

/** What a call asks its backend: the harness's own request, or the chat request its API translates to. */
export interface UpstreamPlan {
  /** The API the backend is sent. */
  endpoint: CallEndpoint;
  body: RequestBody;
  /** The body's bytes: the harness's own when it is sent as it came. */
  text: string;
  /** Set when the call is translated to chat completions. */
  translation?: ApiTranslation;
  /** A translated Responses call's input with its chain expanded: what its answer's conversation starts with. */
  expandedInput?: unknown;
}

/**
 * The Responses and Messages APIs go to a backend as chat completions (so the backend's chat
 * token ids and log-probs are journaled for them too) unless the backend is set to serve them
 * itself (`nativeApis`). A Responses call chained with `previous_response_id` is expanded first,
 * from the responses the gateway journaled, so it works against backends that keep none.
 */
export async function upstreamPlan(
  call: ProxiedCall,
  backend: BackendSpec,
  chains: ResponseChains,
): Promise<UpstreamPlan> {
  const translation = translationOf(call.endpoint);
  if (!translation || backend.nativeApis?.includes(call.endpoint))
    return { endpoint: call.endpoint, body: call.body, text: call.text };
  if (call.endpoint !== 'responses') {
    const body = translation.toChat(call.body) as unknown as RequestBody;
    return { endpoint: 'chat.completions', body, text: JSON.stringify(body), translation };
  }
  const request = await chains.expanded(call);
  const body = translation.toChat(request) as unknown as RequestBody;
  return { endpoint: 'chat.completions', body, text: JSON.stringify(body), translation, expandedInput: request.input };
}
