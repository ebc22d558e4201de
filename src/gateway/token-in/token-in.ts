import { chatRequestOf, repliesOf } from '../../samples/retokenize.js';
import type { CallRecord, TraceStore } from '../../store/trace-store.js';
import { ChatTokenizer, type ChatRequest } from '../../tokenizer/chat-tokenizer.js';
import type { ProxiedCall } from '../proxied-call.js';
import type { BackendSpec, TokenInSpec } from '../routing.js';
import type { UpstreamPlan } from '../upstream-plan.js';
import { withPromptIds } from './sent-ids.js';
import { splicedPrompt, type EarlierCall, type Splice } from './splice.js';

/**
 * Token in for the rollouts of runs with `samples.merge: tito`: a chat call that continues an
 * earlier one of its rollout attempt goes to the backend with its prompt as token ids, the model's
 * own ids spliced in for the turns the harness sent back (see splice.ts). The journal is the
 * history, so this holds across gateway restarts and gateway replicas.
 */
export class TokenInPrompts {
  private readonly tokenizers = new Map<string, ChatTokenizer>();

  constructor(private readonly store: TraceStore) {}

  /** The plan with its prompt as token ids where the call continues a recognised earlier one; else as it was. */
  async planned(call: ProxiedCall, backend: BackendSpec, plan: UpstreamPlan): Promise<UpstreamPlan> {
    if (!call.tokenIn || !backend.tokenIn || plan.endpoint !== 'chat.completions') return plan;
    if (!Array.isArray(plan.body.messages)) return plan;
    const request = plan.body as unknown as ChatRequest;
    const tokenizer = this.tokenizerOf(backend.tokenIn);
    const earlier = (await this.store.listCalls(call.rolloutId, call.attempt)).flatMap(earlierCall);
    let splice: Splice;
    try {
      splice = splicedPrompt(request, earlier, tokenizer);
    } catch {
      // A conversation the template cannot render here (a part that is not text): the backend renders it.
      return plan;
    }
    // Not recognised: the call goes as text, and the batch stage names the break.
    if (splice.ids === null) return plan;
    const body = withPromptIds(plan.body, splice.ids, backend.tokenIn.field);
    return { ...plan, body, text: JSON.stringify(body) };
  }

  private tokenizerOf(spec: TokenInSpec): ChatTokenizer {
    let tokenizer = this.tokenizers.get(spec.tokenizerDir);
    if (!tokenizer) {
      tokenizer = ChatTokenizer.fromDirectory(spec.tokenizerDir);
      this.tokenizers.set(spec.tokenizerDir, tokenizer);
    }
    return tokenizer;
  }
}

/** A journaled call the next one may continue: answered, with the ids of its prompt and of every reply. */
function earlierCall(record: CallRecord): EarlierCall[] {
  if (record.status !== 'ok' || !record.promptIds || !record.choices?.length) return [];
  const request = chatRequestOf(record);
  const replies = repliesOf(record);
  if (!request || replies.length !== record.choices.length) return [];
  const completions = record.choices.map((c) => c.completionIds);
  if (completions.some((ids) => ids === null)) return [];
  return [
    {
      callId: record.id,
      request,
      promptIds: record.promptIds,
      replies: replies.map((reply, i) => ({ message: reply.message, completionIds: completions[i] as number[] })),
    },
  ];
}
