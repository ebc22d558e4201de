import { describe, expect, it } from 'vitest';
import type { IterationWorkflow } from '../client/iterations.js';
import type { RunReport } from '../client/runs.js';
import type { LedgerEntry } from '../ledger/ledger.js';
import type { PolicyRecord, StoredDecision } from '../registry/policy-registry.js';
import { runView } from './run-view.js';

const report = {
  runId: 'r',
  execution: 'COMPLETED',
  startTime: new Date(0),
  closeTime: undefined,
  problem: undefined,
  activity: undefined,
  resumes: [],
  status: {
    runId: 'r',
    state: 'finished',
    stage: 'done',
    nextIteration: 2,
    policyVersion: 'r.v1',
    iterations: [
      {
        iteration: 1,
        candidate: 'r.v1',
        meanReward: 0.5,
        heldoutMeanReward: 0.75,
        gate: { verdict: 'fail', decisionId: 'd1', incumbent: 'v0', promoted: false, reasons: ['gain too small'] },
        samples: { sampledFrom: 'v0', keptByVersionsBehind: { '1': 16 } },
      },
    ],
  },
} as unknown as RunReport;

const ledgerRow = (kind: 'iteration' | 'release', tokens: number) =>
  ({ id: `${kind}-1`, kind, runId: 'r', iteration: 1, metrics: { tokens } }) as unknown as LedgerEntry;
const decision = {
  id: 'd1',
  record: { evidence: { acceptedRate: { incumbent: 0.5, candidate: 0.75 }, gain: { lower: -0.1, upper: 0.6 } } },
} as unknown as StoredDecision;
const workflow: IterationWorkflow = {
  iteration: 1,
  workflowId: 'r-it1',
  executionRunId: 'e1',
  execution: 'COMPLETED',
  result: undefined,
  stageSeconds: { rollouts: 3 },
  release: { workflowId: 'r-it1-release', executionRunId: 'e2' },
};

describe('the run view', () => {
  it("joins an iteration's trainer metrics, the ledger's iteration row (not its release row), the gate's rates and interval, where its samples came from, and workflow links", () => {
    const view = runView({
      report,
      executionRunId: 'e0',
      workflows: [workflow],
      policies: [
        {
          version: 'r.v1',
          trainerMetrics: { loss: 0.25, approxKl: 0.01, clipFraction: 0.1, entropy: 1.5, gradNorm: 2, tokens: 99 },
        } as unknown as PolicyRecord,
      ],
      // The gate's release row for the same iteration comes first: its tokens are the held-out replay's.
      ledger: [ledgerRow('release', 154), ledgerRow('iteration', 218)],
      decision: (id) => (id === 'd1' ? decision : undefined),
      workflowUrl: (id, run) => `ui/${id}/${run}`,
    });
    expect(view.workflowUrl).toBe('ui/r/e0');
    expect(view.iterations).toEqual([
      expect.objectContaining({
        iteration: 1,
        meanReward: 0.5,
        trainer: { loss: 0.25, approxKl: 0.01, clipFraction: 0.1, entropy: 1.5, gradNorm: 2 },
        tokens: { rollouts: 218, trained: null },
        heldout: { candidate: 0.75, production: 0.5, lower: 0.4, upper: 1, incumbent: 'v0', meanReward: 0.75 },
        stageSeconds: { rollouts: 3 },
        samples: { sampledFrom: 'v0', keptByVersionsBehind: { '1': 16 } },
        workflows: [
          { label: 'iteration 1', workflowId: 'r-it1', executionRunId: 'e1', url: 'ui/r-it1/e1' },
          {
            label: 'iteration 1 release',
            workflowId: 'r-it1-release',
            executionRunId: 'e2',
            url: 'ui/r-it1-release/e2',
          },
        ],
      }),
    ]);
  });

  it("shows an iteration's variants from its result without the records' addresses and task ids; null without", () => {
    const used = { name: 'original', id: null, origin: 'original' as const, why: 'unchanged' };
    const result = {
      candidate: 'r.v1',
      rollouts: { meanReward: 0.5 },
      batch: {},
      variants: {
        variantTasks: 1,
        kept: [{ name: 'paged', id: 'p1', origin: 'rigger', why: 'gives up' }],
        used: [{ ...used, rollouts: 4, scored: 4, solved: 2, meanReward: 0.5 }],
        verdicts: [
          {
            name: 'paged',
            id: 'p1',
            origin: 'rigger',
            kept: true,
            reason: 'solved by 2 of 4 samples: kept',
            uri: 'file:///check',
            changes: 'paging 1000',
            why: 'gives up',
            samples: 4,
            scored: 4,
            solved: 2,
            taskIds: ['t1'],
          },
        ],
        rigger: {
          window: [1],
          weaknesses: [{ kind: 'gives_up', subject: 'runs', detail: '3 of 4', share: 0.75 }],
          proposals: [{ name: 'paged', id: 'p1', why: 'gives up', aimedAt: { kind: 'gives_up', subject: 'runs' } }],
          unaddressed: [],
          uri: 'file:///report',
        },
      },
    } as unknown as IterationWorkflow['result'];
    const sources = {
      report,
      workflows: [],
      policies: [],
      ledger: [],
      decision: () => undefined,
      workflowUrl: () => null,
    };
    const [withVariants] = runView({ ...sources, workflows: [{ ...workflow, result }] }).iterations;
    expect(withVariants?.variants).toEqual({
      variantTasks: 1,
      used: [{ ...used, rollouts: 4, scored: 4, solved: 2, meanReward: 0.5 }],
      verdicts: [
        {
          name: 'paged',
          origin: 'rigger',
          kept: true,
          reason: 'solved by 2 of 4 samples: kept',
          changes: 'paging 1000',
          why: 'gives up',
        },
      ],
      rigger: {
        weaknesses: [{ kind: 'gives_up', subject: 'runs', detail: '3 of 4', share: 0.75 }],
        proposals: [{ name: 'paged', why: 'gives up', aimedAt: { kind: 'gives_up', subject: 'runs' } }],
      },
    });
    expect(runView({ ...sources, workflows: [workflow] }).iterations[0]?.variants).toBeNull();
  });
});
