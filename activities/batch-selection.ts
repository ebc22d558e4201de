import { selectionRolloutIds, type RolloutSelection } from '../src/rollouts/rollout-id.js';
import type { BatchStageInput } from '../src/samples/stage.js';

/**
 * The buildBatch activity's input: the batch's rollouts by id, or by selection (batch, tasks,
 * samples per task), which keeps a workflow's history small at 10,000 rollouts and more.
 */
export type BuildBatchInput = Omit<BatchStageInput, 'rolloutIds'> &
  ({ rolloutIds: string[] } | { selection: RolloutSelection });

/** The stage's input, with a selection's rollout ids in the order the batch ran them. */
export function withRolloutIds(input: BuildBatchInput): BatchStageInput {
  if ('rolloutIds' in input) return input;
  const { selection, ...rest } = input;
  return { ...rest, rolloutIds: selectionRolloutIds(selection) };
}
