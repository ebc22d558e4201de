import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { END_OF_TURN, specialTokenId, type ParsedReply } from './chat-format.js';
import type { Checkpoint } from './checkpoint.js';
import { replyGrammar, type ConstrainedRequest } from './constrained/reply-grammar.js';
import { rowConstraint, type ReplyGrammar } from './constrained/token-constraint.js';
import type { TokenMask } from './sampling.js';

/** OpenAI's `tool_choice`: a mode, or one function by name. */
export const toolChoiceField = z
  .union([
    z.enum(['auto', 'none', 'required']),
    z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) }),
  ])
  .nullish();

/** The fields of a chat request that decide whether and how the reply may call tools, or must be JSON. */
export type ToolRequest = ConstrainedRequest;

/**
 * How a row is generated and read for its request's tools and response format: masked while
 * drawn (`mask`, the same for every row; `grammar`, a constraint each row follows on its own),
 * tool calls parsed out or not.
 */
export interface ToolShaping {
  parse: boolean;
  single: boolean;
  mask?: (ids: readonly number[]) => TokenMask;
  grammar?: ReplyGrammar;
}

const CALL_START = specialTokenId('<tool_call>');
const CALL_END = specialTokenId('</tool_call>');
const NO_CALLS: TokenMask = { ban: new Set([CALL_START]) };
const ONLY_END: TokenMask = { allow: new Set([specialTokenId(END_OF_TURN)]) };

/**
 * `tool_choice`, `parallel_tool_calls` and `response_format` as the embedded policy honors them.
 * `none`: the tools stay in the prompt (as vLLM renders them) but the tool-call token is masked,
 * so no call is drawn, and the text is not parsed for calls (vLLM runs no tool parser then).
 * `required`, a named function and JSON output: constrained decoding (constrained/), as vLLM's
 * guided decoding; JSON content is not parsed for calls. `parallel_tool_calls: false`: once a call
 * closes, only the end of the turn may follow — the reply stops after its first call rather than
 * being truncated afterwards (as vLLM does), so its token ids are what the next prompt renders back.
 */
export function toolShaping(body: ToolRequest): ToolShaping {
  const choice = body.tool_choice ?? 'auto';
  const grammar = replyGrammar(body);
  if (grammar?.kind === 'json') return { parse: false, single: false, grammar };
  if (grammar) return { parse: true, single: !grammar.parallel, grammar };
  if (choice === 'none') return { parse: false, single: false, mask: () => NO_CALLS };
  const parse = (body.tools?.length ?? 0) > 0;
  if (!parse || body.parallel_tool_calls !== false) return { parse, single: false };
  return {
    parse,
    single: true,
    mask: (ids) => (ids.at(-1) === CALL_END && ids.includes(CALL_START) ? ONLY_END : null),
  };
}

/** The mask a row of this shaping draws under: a fresh constraint per row where there is a grammar. */
export function rowMask(
  shaping: ToolShaping,
  checkpoint: Checkpoint,
): ((ids: readonly number[]) => TokenMask) | undefined {
  if (!shaping.grammar) return shaping.mask;
  return rowConstraint(shaping.grammar, checkpoint.tokenizer, checkpoint.config.vocabSize);
}

/** vLLM's tool call id: `chatcmpl-tool-` and 32 random hex digits, new for every call. */
export function toolCallId(): string {
  return `chatcmpl-tool-${randomBytes(16).toString('hex')}`;
}

/**
 * A reply's tool calls as the client gets them: each with its own id (frameworks key tool results
 * by id, so `call_0` in every reply would mix them up), at most one where parallel calls are off.
 * The mask already ends the reply after its first call; a second one spelled out in plain bytes
 * (never the special token) is dropped here.
 */
export function replyToolCalls(calls: ParsedReply['toolCalls'], shaping: ToolShaping): ParsedReply['toolCalls'] {
  return (shaping.single ? calls.slice(0, 1) : calls).map((call) => ({ ...call, id: toolCallId() }));
}
