import type { CallEndpoint } from '../store/trace-store.js';
import { messagesTranslation } from './messages/index.js';
import { responsesTranslation } from './responses/index.js';
import type { ApiTranslation } from './translation.js';

/** The APIs spoken as translations of chat completions, by the endpoint the journal names them. */
const TRANSLATIONS: Partial<Record<CallEndpoint, ApiTranslation>> = {
  responses: responsesTranslation as unknown as ApiTranslation,
  messages: messagesTranslation as unknown as ApiTranslation,
};

/** The translation an endpoint is spoken through, if it is one (chat and completions are not). */
export function translationOf(endpoint: CallEndpoint): ApiTranslation | undefined {
  return TRANSLATIONS[endpoint];
}
