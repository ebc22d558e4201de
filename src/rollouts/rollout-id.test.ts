import { describe, expect, it } from 'vitest';
import { newRolloutSchema } from './rollout.js';
import {
  batchRolloutIdProblems,
  ROLLOUT_ID_MAX_LENGTH,
  rolloutIdFor,
  selectionRolloutIds,
  taskSamples,
} from './rollout-id.js';

describe('rollout ids of a batch', () => {
  it('are all accepted by the gateway when the batch passes the check', () => {
    const taskId = 't'.repeat(ROLLOUT_ID_MAX_LENGTH - 'batch-1..9'.length);
    expect(batchRolloutIdProblems('batch-1', [taskId], 10)).toEqual([]);
    const id = rolloutIdFor('batch-1', taskId, 9);
    expect(id).toHaveLength(ROLLOUT_ID_MAX_LENGTH);
    expect(newRolloutSchema.safeParse({ id }).success).toBe(true);
  });

  it('are refused before launch when one would be too long, naming the batch id, the task ids and the limit', () => {
    const long = 't'.repeat(ROLLOUT_ID_MAX_LENGTH - 'batch-1..9'.length);
    // The 11th sample needs one more digit.
    const problems = batchRolloutIdProblems('batch-1', ['short', long], 11);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(`at most ${ROLLOUT_ID_MAX_LENGTH} characters`);
    expect(problems[0]).toContain('batch id "batch-1"');
    expect(problems[0]).toContain(`"${long}"`);
    expect(problems[0]).not.toContain('"short"');
    expect(newRolloutSchema.safeParse({ id: rolloutIdFor('batch-1', long, 10) }).success).toBe(false);
  });

  it('refuses a batch id with characters ids may not hold', () => {
    expect(batchRolloutIdProblems('batch 1', ['a'], 1)).toEqual([
      'batch id "batch 1" may hold letters, digits and . _ : - only',
    ]);
  });
});

describe('the rollouts of a selection', () => {
  it('are each task samplesPerTask times, task by task, with the ids the runner gives them', () => {
    expect(taskSamples(['a', 'b'], 2)).toEqual([
      { task: 'a', sample: 0 },
      { task: 'a', sample: 1 },
      { task: 'b', sample: 0 },
      { task: 'b', sample: 1 },
    ]);
    expect(selectionRolloutIds({ batchId: 'run.it1', taskIds: ['sum 1', 'b'], samplesPerTask: 2 })).toEqual([
      'run.it1.sum_1.0',
      'run.it1.sum_1.1',
      'run.it1.b.0',
      'run.it1.b.1',
    ]);
    expect(selectionRolloutIds({ batchId: 'x', taskIds: ['a'], samplesPerTask: 0 })).toEqual([]);
  });
});
