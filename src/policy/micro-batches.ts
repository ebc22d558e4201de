import type { ModelConfig } from './model-config.js';

/**
 * A training pass keeps every activation of its rows on the tape until the gradients are taken.
 * On tfjs's wasm backend they all live in one wasm32 heap of at most 4 GiB; past it the backend
 * fails with "memory access out of bounds". So a minibatch runs as micro-batches whose gradients
 * add up (the loss is a sum over rows), each under a budget of estimated peak bytes.
 */

/**
 * Peak bytes a PPO or supervised pass over `rows` rows padded to `width` positions is estimated to
 * take, gradients included. Two terms: attention scores (layers × heads × width² per row) and
 * per-position activations (logits, one-hots, projections). Measured with tf.profile on the files
 * example's policy (2 layers, 4 heads, head_dim 16, hidden 64, intermediate 256, vocab 264) on the
 * wasm backend: ~440 MiB per row at width 901, 134 at 450, 45 at 225, i.e. ~14 floats per
 * attention score and ~10 per position per unit of `perPosition` below; both are taken as 16 here
 * so the estimate errs high (by ~25% on that policy).
 */
export function trainingPeakBytes(config: ModelConfig, rows: number, width: number): number {
  const { numLayers, numHeads, numKvHeads, headDim, hiddenSize, intermediateSize, vocabSize } = config;
  const scores = numLayers * numHeads * width * width;
  const perPosition =
    vocabSize + numLayers * (4 * hiddenSize + 2 * (numHeads + numKvHeads) * headDim + 3 * intermediateSize);
  const floatsPerValue = 16;
  return 4 * floatsPerValue * rows * (scores + width * perPosition);
}

/**
 * The largest heap the wasm backend can grow to (its getHeapMax: 4 GiB less one 64 KiB page).
 */
export const WASM_HEAP_BYTES = 4294901760;

/**
 * Estimated peak of one micro-batch: a quarter of the wasm heap, leaving room for the weights,
 * Adam's moments, the summed gradients and the heap's fragmentation across micro-batches of
 * different shapes. (20 rows of ~900 positions on the files example's policy, which crashed in one
 * pass (~8.6 GiB at the measured ~440 MiB a row), run as ten micro-batches of one to three rows.)
 */
export const MICRO_BATCH_BYTES = 2 ** 30;

/**
 * Rows (indices into `widths`) grouped into micro-batches whose estimated peak stays within
 * `budgetBytes`: longest first, so each group pads to its first row's width and rows of like
 * length share a group; a row over the budget alone gets a group of its own. Deterministic.
 */
export function planMicroBatches(
  widths: readonly number[],
  peakBytes: (rows: number, width: number) => number,
  budgetBytes: number,
): number[][] {
  const order = widths.map((_, i) => i).sort((a, b) => (widths[b] as number) - (widths[a] as number) || a - b);
  const groups: number[][] = [];
  let current: number[] = [];
  for (const row of order) {
    const width = widths[current[0] ?? row] as number;
    if (current.length > 0 && peakBytes(current.length + 1, width) > budgetBytes) {
      groups.push(current);
      current = [];
    }
    current.push(row);
  }
  if (current.length > 0) groups.push(current);
  return groups;
}
