import type { Checkpoint } from './checkpoint.js';
import { seededRandom } from '../random.js';
import { sampleToken } from './model.js';

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
  /** Called after every sampled token. */
  onToken?(row: GenerationState): void;
}

export interface GenerationState {
  ids: number[];
  logprobs: number[];
  finishReason: 'stop' | 'length' | null;
  /** The stop token id or stop string that ended the row, if any. */
  stopReason: number | string | null;
}

interface Active {
  row: GenerationRow;
  state: GenerationState;
  random: () => number;
  resolve(state: GenerationState): void;
  reject(err: unknown): void;
}

/**
 * Continuous batching: every step runs one forward pass per model over all rows in flight, and
 * rows that arrive while others generate join at the next step.
 */
export class GenerationScheduler {
  private readonly active: Active[] = [];
  private running = false;

  constructor(private readonly maxRows = 64) {}

  generate(row: GenerationRow): Promise<GenerationState> {
    return new Promise((resolve, reject) => {
      this.active.push({ row, state: { ids: [], logprobs: [], finishReason: null, stopReason: null }, random: seededRandom(row.seed), resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.loop());
      }
    });
  }

  private async loop(): Promise<void> {
    while (this.active.length > 0) {
      const batch = this.active.slice(0, this.maxRows);
      const byModel = new Map<Checkpoint, Active[]>();
      for (const a of batch) byModel.set(a.row.checkpoint, [...(byModel.get(a.row.checkpoint) ?? []), a]);
      for (const [checkpoint, rows] of byModel) {
        try {
          const logits = checkpoint.model.lastLogits(rows.map((a) => [...a.row.prompt, ...a.state.ids]));
          rows.forEach((a, i) => this.advance(a, logits[i] as number[]));
        } catch (err) {
          for (const a of rows) this.finish(a, err);
        }
      }
      // Let new requests in (and I/O out) between steps.
      await new Promise((r) => setImmediate(r));
    }
    this.running = false;
  }

  private advance(a: Active, logits: number[]): void {
    const { id, logprob } = sampleToken(logits, a.row.temperature, a.row.topP, a.random());
    a.state.ids.push(id);
    a.state.logprobs.push(logprob);
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
    this.active.splice(this.active.indexOf(a), 1);
    if (err) a.reject(err);
    else a.resolve(a.state);
  }
}
