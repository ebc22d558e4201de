import { describe, expect, it } from 'vitest';
import type { RunStatus } from '../../workflows/index.js';
import { formatRunSummary, iterationLine, pipelineLine } from './run-format.js';

const status = (more: Partial<RunStatus>): RunStatus => ({
  runId: 'r',
  state: 'running',
  stage: 'iteration 2',
  nextIteration: 2,
  policyVersion: 'r.v1',
  iterations: [],
  ...more,
});

describe('how rein status words the asynchronous schedule', () => {
  it('names what overlaps: the iteration that trains, and the next one sampling ahead', () => {
    expect(pipelineLine(status({}))).toBeNull();
    expect(
      pipelineLine(status({ rolloutsAhead: { iteration: 3, policyVersion: 'r.v1', workflowId: 'r-it3-rollouts' } })),
    ).toBe(
      "pipeline: iteration 2 trains r.v1 (batch, update, held-out) | iteration 3's rollouts sample r.v1 (r-it3-rollouts)",
    );
  });

  it("says where an iteration's samples came from only when some were stale", () => {
    const it = { iteration: 2, candidate: 'r.v2', meanReward: 0.5, heldoutMeanReward: null };
    expect(iterationLine({ ...it, samples: { sampledFrom: 'r.v1', keptByVersionsBehind: { '0': 16 } } })).toBe(
      'iteration 2: r.v2  train mean reward 0.500, held-out -',
    );
    expect(
      iterationLine({
        ...it,
        samples: {
          sampledFrom: 'v0',
          keptByVersionsBehind: { '1': 14, '0': 2 },
          importance: { maskedFraction: 0.02, cappedFraction: 0.1, ratioMean: 1.01, ratioMax: 1.314 },
        },
      }),
    ).toBe(
      'iteration 2: r.v2  train mean reward 0.500, held-out -; sampled from v0 (rollouts by versions behind: 1 x 14), importance ratio max 1.31, masked 2.0%',
    );
  });
});

describe('how rein status says why rollouts failed', () => {
  it("prints one rollout's reason per stage and class, of the latest iteration with failures", () => {
    const report = {
      runId: 'r',
      execution: 'RUNNING',
      startTime: new Date(0),
      closeTime: undefined,
      problem: undefined,
      activity: undefined,
      resumes: [],
      status: status({
        iterations: [
          {
            iteration: 1,
            candidate: 'r.v1',
            meanReward: 0.5,
            heldoutMeanReward: null,
            failures: { rollouts: { harness: 2 } },
            failureReasons: {
              rollouts: {
                harness:
                  "the harness exited with 1 after model call c7 failed: the backend answered 400: This model's maximum context length is 1024 tokens",
              },
            },
          },
          { iteration: 2, candidate: 'r.v2', meanReward: 0.6, heldoutMeanReward: null },
        ],
      }),
    };
    expect(formatRunSummary(report)).toContain(
      "Why rollouts failed in iteration 1 (one rollout's reason per class):\n" +
        "  training rollouts, harness: the harness exited with 1 after model call c7 failed: the backend answered 400: This model's maximum context length is 1024 tokens\n",
    );
  });
});
