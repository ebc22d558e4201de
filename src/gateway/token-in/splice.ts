import type { ChatRequest, ChatTokenizer } from '../../tokenizer/chat-tokenizer.js';
import { canonical, sameTurn } from './same-turn.js';

type Json = Record<string, unknown>;

/** An earlier call of the rollout attempt, as token in needs it: what it was asked, and what the model answered. */
export interface EarlierCall {
  callId: string;
  /** The chat request the backend was sent. */
  request: ChatRequest;
  /** The ids the model was prompted with. */
  promptIds: readonly number[];
  /** Each choice: the assistant message the harness got and the ids the model produced for it. */
  replies: ReadonlyArray<{ message: Json; completionIds: readonly number[] }>;
}

export type Splice =
  | { ids: number[]; extends: { callId: string; choice: number } }
  | { ids: null; reason: 'first_call' | 'not_recognised' | 'template_context' };

/**
 * The prompt ids for a chat request that continues an earlier call of the same rollout: that
 * call's prompt ids, the ids the model produced for the reply the harness sent back, then the new
 * turns (tool results, the user's next message) rendered with the model's chat template. The
 * model sees exactly what training will see, so the rollout stays one sequence even when the
 * harness re-serialised its history (see sameTurn). Null, with why, when no earlier call is
 * recognised: the request then goes as text, and the break is found and named when samples are built.
 */
export function splicedPrompt(request: ChatRequest, earlier: readonly EarlierCall[], tokenizer: ChatTokenizer): Splice {
  if (earlier.length === 0) return { ids: null, reason: 'first_call' };
  for (let i = earlier.length - 1; i >= 0; i--) {
    const call = earlier[i] as EarlierCall;
    const choice = continuedChoice(request, call);
    if (choice < 0) continue;
    const reply = call.replies[choice] as EarlierCall['replies'][number];
    const newTurns = request.messages.slice(call.request.messages.length + 1);
    const rest = continuation(tokenizer, request, newTurns, tokenizer.decode(reply.completionIds));
    if (rest === undefined) return { ids: null, reason: 'template_context' };
    return {
      ids: [...call.promptIds, ...reply.completionIds, ...tokenizer.encode(rest)],
      extends: { callId: call.callId, choice },
    };
  }
  return { ids: null, reason: 'not_recognised' };
}

/**
 * The choice of `call` whose reply the request sends back, after the call's own conversation and
 * before new turns, with the same tools and template arguments; -1 when there is none.
 */
function continuedChoice(request: ChatRequest, call: EarlierCall): number {
  const before = call.request.messages;
  const sent = request.messages;
  if (sent.length < before.length + 2) return -1;
  if (canonical(request.tools ?? null) !== canonical(call.request.tools ?? null)) return -1;
  if (canonical(request.chat_template_kwargs ?? null) !== canonical(call.request.chat_template_kwargs ?? null))
    return -1;
  if (!before.every((message, i) => sameTurn(sent[i] as Json, message))) return -1;
  const reply = sent[before.length] as Json;
  return call.replies.findIndex((r) => sameTurn(reply, r.message));
}

/** Stand in for a conversation before the new turns, to render those as the template does mid-conversation. */
const ASKED = 'REIN-TOKEN-IN-ASKED';
const ANSWERED = 'REIN-TOKEN-IN-ANSWERED';

/**
 * The text that follows a reply the model ended with `completionText`: the rest of the template's
 * end of turn (a newline after `<|im_end|>`, say), then the new turns and the generation prompt,
 * rendered after a stand-in exchange so that the template treats them as it does mid-conversation.
 * Undefined when the template does not render the stand-in reply as it is.
 */
function continuation(
  tokenizer: ChatTokenizer,
  request: ChatRequest,
  newTurns: ChatRequest['messages'],
  completionText: string,
): string | undefined {
  const standIn = [
    { role: 'user', content: ASKED },
    { role: 'assistant', content: ANSWERED },
  ];
  const whole = tokenizer.render(
    {
      ...(request.tools && { tools: request.tools }),
      ...(request.chat_template_kwargs && { chat_template_kwargs: request.chat_template_kwargs }),
      messages: [...standIn, ...newTurns],
    },
    true,
  );
  const at = whole.indexOf(ANSWERED);
  if (at < 0 || whole.indexOf(ANSWERED, at + 1) >= 0) return undefined;
  return unsaid(whole.slice(at + ANSWERED.length), completionText);
}

/**
 * What follows a reply, less the start of it the model wrote itself: it ends its turn with the
 * end-of-turn token, which the template writes after a reply it renders.
 */
function unsaid(after: string, completionText: string): string {
  for (let k = Math.min(after.length, completionText.length); k > 0; k--)
    if (completionText.endsWith(after.slice(0, k))) return after.slice(k);
  return after;
}
