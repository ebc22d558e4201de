import type { Checkpoint } from './checkpoint.js';
import { seededRandom } from '../random.js';
import { sampleToken, type Decoder } from './model.js';
import { topLogprobs, type TokenMask } from './sampling.js';

/** One sequence being generated: a choice of a request. */
export interface GenerationRow {
  checkpoint: Checkpoint;
  prompt: number[];
  maxTokens: number;
  temperature: number;
  topP: number;
  seed: number;
  stopIds: number[];
  stopStrings: string[];
  /** Which tokens the row may draw next, given those it drew (tool_choice, parallel_tool_calls); none: any. */
  mask?(ids: readonly number[]): TokenMask;
  /** How many of the most likely tokens to report at each step (top_logprobs); none: 0. */
  topLogprobs?: number;
  /** Called after every sampled token. */
  onToken?(row: GenerationState): void;
}

export interface GenerationState {
  ids: number[];
  logprobs: number[];
  /** Per token, the row's topLogprobs most likely tokens and their log-probs (empty lists when none were asked). */
  top: Array<Array<{ id: number; logprob: number }>>;
  finishReason: 'stop' | 'length' | null;
  /** The stop token id or stop string that ended the row, if any. */
  stopReason: number | string | null;
}

interface Active {
  key: number;
  row: GenerationRow;
  state: GenerationState;
  random: () => number;
  resolve(state: GenerationState): void;
  reject(err: unknown): void;
}

/**
 * Continuous batching: every step runs one cached decoding pass per model over all rows in
 * flight; rows that arrive while others generate are prefilled and join at the next step.
 */
export class GenerationScheduler {
  private readonly waiting: Active[] = [];
  private readonly decoding = new Map<Checkpoint, { decoder: Decoder; rows: Map<number, Active> }>();
  private nextKey = 0;
  private running = false;
  /** Rows not yet finished, by model, and who waits for a model to have none. */
  private readonly pending = new Map<Checkpoint, number>();
  private readonly idleWaiters = new Map<Checkpoint, Array<() => void>>();

  constructor(private readonly maxRows = 64) {}

  /** Resolves when no row of this model is waiting or decoding (at once if none is). */
  idle(checkpoint: Checkpoint): Promise<void> {
    if (!this.pending.get(checkpoint)) return Promise.resolve();
    return new Promise((resolve) =>
      this.idleWaiters.set(checkpoint, [...(this.idleWaiters.get(checkpoint) ?? []), resolve]),
    );
  }

  generate(row: GenerationRow): Promise<GenerationState> {
    this.pending.set(row.checkpoint, (this.pending.get(row.checkpoint) ?? 0) + 1);
    return new Promise((resolve, reject) => {
      this.waiting.push({
        key: this.nextKey++,
        row,
        state: { ids: [], logprobs: [], top: [], finishReason: null, stopReason: null },
        random: seededRandom(row.seed),
        resolve,
        reject,
      });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.loop());
      }
    });
  }

  private inFlight(): number {
    let n = 0;
    for (const { rows } of this.decoding.values()) n += rows.size;
    return n;
  }

  private async loop(): Promise<void> {
    while (this.waiting.length > 0 || this.inFlight() > 0) {
      // Rows already decoding advance a token; then waiting rows join (their prompt is the
      // prefill, whose last logits give their first token), so all rows end on one column.
      for (const group of this.decoding.values()) {
        if (group.rows.size === 0) continue;
        this.run(group, () =>
          group.decoder.step([...group.rows.values()].map((a) => ({ key: a.key, id: a.state.ids.at(-1) as number }))),
        );
      }
      const joining = this.waiting.splice(0, Math.max(0, this.maxRows - this.inFlight()));
      const byModel = new Map<Checkpoint, Active[]>();
      for (const a of joining) byModel.set(a.row.checkpoint, [...(byModel.get(a.row.checkpoint) ?? []), a]);
      for (const [checkpoint, rows] of byModel) {
        let group = this.decoding.get(checkpoint);
        if (!group) this.decoding.set(checkpoint, (group = { decoder: checkpoint.model.decoder(), rows: new Map() }));
        for (const a of rows) group.rows.set(a.key, a);
        const added = group;
        this.run(added, () => added.decoder.add(rows.map((a) => ({ key: a.key, ids: a.row.prompt }))), rows);
      }
      for (const [checkpoint, group] of this.decoding) {
        if (group.rows.size > 0) continue;
        group.decoder.dispose();
        this.decoding.delete(checkpoint);
      }
      // Let new requests in (and I/O out) between steps.
      await new Promise((r) => setImmediate(r));
    }
    this.running = false;
  }

  /** One pass of a model's decoder; on failure the rows it was for fail and leave the batch. */
  private run(
    group: { decoder: Decoder; rows: Map<number, Active> },
    pass: () => Map<number, number[]>,
    only?: Active[],
  ): void {
    let logits: Map<number, number[]>;
    try {
      logits = pass();
    } catch (err) {
      const failed = only ?? [...group.rows.values()];
      for (const a of failed) group.rows.delete(a.key);
      try {
        group.decoder.remove(failed.map((a) => a.key).filter((k) => group.decoder.rows().includes(k)));
      } catch {
        group.decoder.dispose();
        for (const a of group.rows.values()) this.finish(a, err);
        group.rows.clear();
      }
      for (const a of failed) this.finish(a, err);
      return;
    }
    const done: number[] = [];
    for (const [key, row] of logits) {
      const a = group.rows.get(key) as Active;
      this.advance(a, row);
      if (a.state.finishReason) {
        done.push(a.key);
        group.rows.delete(a.key);
      }
    }
    if (done.length) group.decoder.remove(done);
  }

  private advance(a: Active, logits: number[]): void {
    const mask = a.row.mask?.(a.state.ids) ?? null;
    const { id, logprob } = sampleToken(logits, a.row.temperature, a.row.topP, a.random(), mask);
    a.state.ids.push(id);
    a.state.logprobs.push(logprob);
    a.state.top.push(topLogprobs(logits, a.row.topLogprobs ?? 0));
    if (a.row.stopIds.includes(id)) {
      a.state.finishReason = 'stop';
      a.state.stopReason = id;
    } else if (a.row.stopStrings.length > 0) {
      const text = a.row.checkpoint.tokenizer.decode(a.state.ids);
      const hit = a.row.stopStrings.find((s) => text.includes(s));
      if (hit !== undefined) {
        a.state.finishReason = 'stop';
        a.state.stopReason = hit;
      }
    }
    if (!a.state.finishReason && a.state.ids.length >= a.row.maxTokens) a.state.finishReason = 'length';
    a.row.onToken?.(a.state);
    if (a.state.finishReason) this.finish(a);
  }

  private finish(a: Active, err?: unknown): void {
    if (err) a.reject(err);
    else a.resolve(a.state);
    const left = (this.pending.get(a.row.checkpoint) ?? 1) - 1;
    if (left > 0) {
      this.pending.set(a.row.checkpoint, left);
      return;
    }
    this.pending.delete(a.row.checkpoint);
    for (const resolve of this.idleWaiters.get(a.row.checkpoint) ?? []) resolve();
    this.idleWaiters.delete(a.row.checkpoint);
  }
}
