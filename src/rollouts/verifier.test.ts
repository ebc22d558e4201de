import { describe, expect, it } from 'vitest';
import { rewardOf } from './verifier.js';

describe("reading the verifier's reward", () => {
  it('weights the components of its last stdout line into one reward, and keeps them all', () => {
    const stdout = 'checking…\n{"components": {"correct": 1, "format": 0.5, "extra": 2}}\n';
    expect(rewardOf(stdout, { correct: 0.75, format: 0.25 })).toEqual({
      reward: 0.875,
      components: { correct: 1, format: 0.5, extra: 2 },
    });
  });

  it('refuses a last line that is not JSON, components that are not finite numbers, and a weighted component it did not report', () => {
    expect(rewardOf('all good\n', { correct: 1 })).toEqual({
      error: expect.stringContaining('the verifier printed no JSON'),
    });
    expect(rewardOf('{"components": {"correct": "yes"}}', { correct: 1 })).toEqual({
      error: expect.stringContaining('no "components" object of finite numbers'),
    });
    expect(rewardOf('{"reward": 1}', { correct: 1 })).toEqual({
      error: expect.stringContaining('no "components" object'),
    });
    expect(rewardOf('{"components": {"format": 1}}', { correct: 1, format: 1 })).toEqual({
      error: 'the verifier reported no correct, which the reward weights use',
    });
  });
});
