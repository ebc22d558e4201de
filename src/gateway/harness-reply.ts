import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import type { ApiTranslation } from '../apis/translation.js';
import type { CallEndpoint } from '../store/trace-store.js';
import { backendMessage } from './backend-reply.js';
import { apiErrorType } from './errors.js';
import { anythingInjected, stripInjected, stripInjectedText, withoutTokenIds, type Injected } from './openai-shapes.js';
import type { BackendResponse, JsonObject, RequestBody } from './openai-types.js';
import type { SseEvent } from './sse.js';

/**
 * What the harness gets for the backend's answer, and what the journal keeps of it. Transparent
 * for the APIs the backend is sent as they came (its bytes, less what the gateway injected);
 * translated for the Responses and Messages APIs sent to a backend as chat completions (the chat
 * answer becomes the API's own, its token ids kept for the journal).
 */
export interface HarnessReply {
  /** The API the backend is sent and answers. */
  readonly upstream: CallEndpoint;
  /** Whether a stream that ends without `data: [DONE]` was cut (the Responses API sends none). */
  readonly needsDone: boolean;
  /** A whole answer (read, token ids taken): the harness's body and what the journal keeps (both less injections). */
  whole(response: BackendResponse, text: string): { journal: unknown; text: string };
  /** The body of a backend's error answer for the harness. */
  error(status: number, text: string): string;
  /** The SSE text the harness gets for one event of the backend's stream, its data read as `chunk`. */
  event(event: SseEvent, chunk: JsonObject): string;
  /** The SSE text that ends the harness's stream, given the backend's `[DONE]` frame (if it sent one) and any rest. */
  end(done: string | undefined, rest: string): string;
  /** What the journal keeps of a streamed answer, from the backend's response assembled from its chunks. */
  streamed(assembled: BackendResponse): unknown;
  /** Whether a stream holding a chunk the gateway cannot read is cut for the harness (it cannot be translated). */
  readonly cutOnBadChunk: boolean;
}

/** The backend's own bytes, less what the gateway injected. */
export function transparentReply(endpoint: CallEndpoint, injected: Injected): HarnessReply {
  return {
    upstream: endpoint,
    needsDone: endpoint !== 'responses',
    cutOnBadChunk: false,
    whole(response, text) {
      stripInjected(response, injected);
      return { journal: withoutTokenIds(response), text: stripInjectedText(text, injected) };
    },
    error: (_status, text) => text,
    event: (event) =>
      anythingInjected(injected) && event.data !== null
        ? withData(event, stripInjectedText(event.data, injected))
        : event.raw,
    end: (done, rest) => done ?? rest,
    streamed(assembled) {
      stripInjected(assembled, injected);
      return withoutTokenIds(assembled);
    },
  };
}

/**
 * The chat answer the backend gave, in the words of the API the harness called. Log-probs the
 * gateway injected (for the journal, which has taken them already) stay out of the translation,
 * as they stay out of a transparent answer: the harness gets what its own request asked for.
 */
export function translatedReply(translation: ApiTranslation, request: RequestBody, injected: Injected): HarnessReply {
  const stream = translation.streamFromChat(request);
  const asked = <T extends JsonObject>(chat: T): T => (injected.logprobs ? withoutLogprobs(chat) : chat);
  // The stream's last events close its answer: they are made when it is journaled, and go out after.
  let closing: string | undefined;
  return {
    upstream: 'chat.completions',
    needsDone: true,
    cutOnBadChunk: true,
    whole(response) {
      const answer = translation.fromChat(asked(response) as unknown as ChatCompletion, request);
      return { journal: answer, text: JSON.stringify(answer) };
    },
    error: (status, text) => {
      const message = backendMessage(text) ?? `the backend answered ${status}`;
      return JSON.stringify(translation.errorBody(status, apiErrorType(status), message));
    },
    event: (_event, chunk) => stream.chunk(asked(chunk) as unknown as ChatCompletionChunk),
    end: () => closing ?? stream.end(),
    streamed: () => {
      closing = stream.end();
      return stream.answer();
    },
  };
}

/** A chat answer or chunk with its choices' log-probs null, the backend's own objects left as they are. */
function withoutLogprobs<T extends JsonObject>(chat: T): T {
  if (!Array.isArray(chat.choices)) return chat;
  const choices = chat.choices.map((choice) =>
    choice !== null && typeof choice === 'object' && !Array.isArray(choice) ? { ...choice, logprobs: null } : choice,
  );
  return { ...chat, choices };
}

/** An SSE event with its data replaced, every other line as it was. */
function withData(event: { raw: string }, data: string): string {
  if (event.raw.startsWith('data: ') && event.raw.indexOf('\n') === event.raw.length - 2) return `data: ${data}\n\n`;
  const lines = event.raw.split(/\r?\n/).filter((line) => line !== '');
  const first = lines.findIndex((line) => line.startsWith('data:'));
  const kept = lines.filter((line) => !line.startsWith('data:'));
  kept.splice(first, 0, `data: ${data}`);
  return `${kept.join('\n')}\n\n`;
}
