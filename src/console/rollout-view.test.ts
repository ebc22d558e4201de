import { describe, expect, it } from 'vitest';
import { iterationOfBatch } from './rollout-view.js';

describe("a rollout's place in its run", () => {
  it('reads the run and iteration from a training batch id, and nothing from others', () => {
    expect(iterationOfBatch('learn-1.it3')).toEqual({ runId: 'learn-1', iteration: 3 });
    expect(iterationOfBatch('a.b.it12')).toEqual({ runId: 'a.b', iteration: 12 });
    expect(iterationOfBatch('heldout.v0.9684c11984e8.h-20341668')).toBeNull();
    expect(iterationOfBatch(undefined)).toBeNull();
    expect(iterationOfBatch('.it1')).toBeNull();
  });
});
