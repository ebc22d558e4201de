import { z } from 'zod';
import type { PolicyServerMetrics } from '../metrics/policy-server-metrics.js';
import { END_OF_TURN, specialTokenId } from './chat-format.js';
import type { Checkpoint } from './checkpoint.js';
import { HttpError } from './policy-http.js';
import type { GenerationRow, GenerationScheduler, GenerationState } from './scheduler.js';

/** The sampling parameters chat and completions share, as vLLM reads them. */
export const samplingFields = {
  model: z.string().min(1),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(10).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  n: z.number().int().min(1).max(32).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(16)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).passthrough().nullish(),
  return_token_ids: z.boolean().nullish(),
};
export type SamplingRequest = z.infer<z.ZodObject<typeof samplingFields>>;

/**
 * Where a request's rows are generated: batched with every other request's by the scheduler, counted in the metrics.
 */
export interface Generator {
  scheduler: GenerationScheduler;
  metrics: PolicyServerMetrics;
}

/**
 * How a request's rows are drawn: a mask they share, or `rowMask` making each row its own (a
 * constraint that follows the row's tokens), and how many top log-probs to report.
 */
export type RowShaping = Pick<GenerationRow, 'mask' | 'topLogprobs'> & { rowMask?: () => GenerationRow['mask'] };

const withMask = (mask: GenerationRow['mask']) => (mask ? { mask } : {});

/** Generates n rows for one prompt, checking the context limit as vLLM does. */
export function generateRows(
  generator: Generator,
  checkpoint: Checkpoint,
  prompt: number[],
  body: SamplingRequest,
  onToken?: (choice: number, state: GenerationState) => void,
  shaping: RowShaping = {},
): Array<Promise<GenerationState>> {
  const { rowMask, ...shared } = shaping;
  const { vocabSize } = checkpoint.config;
  const outside = prompt.find((id) => id >= vocabSize);
  if (outside !== undefined)
    throw new HttpError(
      400,
      'BadRequestError',
      `prompt: token id ${outside} is outside the vocabulary of ${body.model} (ids 0 to ${vocabSize - 1})`,
    );
  const context = checkpoint.config.maxPositions;
  const requested = body.max_tokens ?? body.max_completion_tokens ?? undefined;
  const maxTokens = requested ?? context - prompt.length;
  if (prompt.length + maxTokens > context || maxTokens < 1) {
    throw new HttpError(
      400,
      'BadRequestError',
      `This model's maximum context length is ${context} tokens. However, you requested ${prompt.length + Math.max(maxTokens, 1)} tokens (${prompt.length} in the prompt, ${Math.max(maxTokens, 1)} for the completion). Please reduce the prompt or max_tokens.`,
    );
  }
  const seed = body.seed ?? Math.floor(Math.random() * 2 ** 31);
  return Array.from({ length: body.n ?? 1 }, (_, choice) =>
    generator.metrics.row(
      prompt.length,
      generator.scheduler.generate({
        checkpoint,
        prompt,
        maxTokens,
        temperature: body.temperature ?? 1,
        topP: body.top_p ?? 1,
        seed: seed + choice,
        stopIds: [specialTokenId(END_OF_TURN), specialTokenId('<|endoftext|>')],
        stopStrings: body.stop === undefined || body.stop === null ? [] : ([] as string[]).concat(body.stop),
        ...shared,
        ...withMask(rowMask?.()),
        ...(onToken && { onToken: (state) => onToken(choice, state) }),
      }),
    ),
  );
}

/** The reply text of a row: without the end-of-turn token, cut at a stop string. */
export function replyText(checkpoint: Checkpoint, state: GenerationState): string {
  const ids = typeof state.stopReason === 'number' ? state.ids.slice(0, -1) : state.ids;
  const text = checkpoint.tokenizer.decode(ids);
  return typeof state.stopReason === 'string' ? text.slice(0, text.indexOf(state.stopReason)) : text;
}

/** How many characters at the end of a growing reply a stop string may still claim. */
export function stopHoldBack(stop: SamplingRequest['stop']): number {
  return Math.max(0, ...([] as string[]).concat(stop ?? []).map((s) => s.length - 1));
}

/**
 * How much of a growing reply can go out: not the last characters a stop string may still
 * claim, nor a trailing U+FFFD that is only the first bytes of a character (byte-level tokens).
 */
export function settledLength(text: string, holdBack: number): number {
  let end = text.length - holdBack;
  while (end > 0 && text[end - 1] === '\ufffd') end--;
  return end;
}

/** What a stream has sent of a row so far: characters of its text, and tokens. */
export interface Emitted {
  chars: number;
  tokens: number;
}

export function nothingEmitted(n: number): Emitted[] {
  return Array.from({ length: n }, () => ({ chars: 0, tokens: 0 }));
}
