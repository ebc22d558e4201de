import { describe, expect, it } from 'vitest';
import { stageSecondsOf } from './iterations.js';

describe('stage durations from the stages an iteration recorded', () => {
  it('ends each stage where the next began, and the last at the end given (now, or the close)', () => {
    const stages = { rollouts: 10_000, batch: 26_000, update: 27_000, heldout: 30_000, ledger: 38_000 };
    expect(stageSecondsOf(stages, 41_500)).toEqual({ rollouts: 16, batch: 1, update: 3, heldout: 8, ledger: 3.5 });
    expect(stageSecondsOf({ ...stages, done: 39_000 }, 99_000)).toEqual({
      rollouts: 16,
      batch: 1,
      update: 3,
      heldout: 8,
      ledger: 1,
    });
    // Before any stage recorded (an iteration from before stages were kept, or one just started): nothing.
    expect(stageSecondsOf({}, 5_000)).toEqual({});
  });
});
