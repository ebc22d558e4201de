import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../src/artifacts/local-store.js';
import { validateConfig } from '../src/config/load.js';
import { curriculumTaskIds } from '../src/environments/curriculum.js';
import { GatewayControlClient } from '../src/gateway/control-client.js';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import type { TraceStore } from '../src/store/trace-store.js';
import { ADMIN_KEY, startTestGateway } from '../test/helpers/gateway.js';
import { createEnvironmentActivities } from './environment.js';
import { fixedRunDeps } from './run-deps.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-environment-activity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const module = path.join(import.meta.dirname, '..', 'examples', 'calculator-agent', 'environment.mjs');

/** A validation rollout with its verifier's reward (null: lost to a fault before it was scored). */
async function scored(store: SqliteTraceStore, id: string, taskId: string, reward: number | null) {
  await store.createRollout({ id, taskId, metadata: { sample: Number(id.split('.').at(-1)) } });
  await store.startAttempt(id);
  await store.setRolloutStatus(id, { status: 'running' }, 'admin');
  if (reward === null) {
    await store.setRolloutStatus(id, { status: 'failed', failureClass: 'infrastructure' }, 'admin');
    return;
  }
  await store.appendEvent(id, 2, { type: 'reward', value: reward, components: { success: reward } }, 'admin');
  await store.setRolloutStatus(id, { status: 'succeeded' }, 'admin');
}

describe('the environment variants of a run', () => {
  it('checks each declared variant once, keeps those some samples solve and not all, and mixes the kept ones in', async () => {
    const store = new SqliteTraceStore(path.join(dir, 'traces.sqlite'));
    const config = validateConfig(
      {
        environment: {
          module,
          variants: [
            { name: 'worded', observations: { template: '= {observation}' } },
            { name: 'broken', rules: { transientErrors: { every: 2 } } },
            { name: 'easy', observations: { noise: { lines: 1 } } },
          ],
          validation: { samples: 2, tasks: 2 },
          curriculum: { share: 0.5 },
          rigger: { proposals: 0 },
        },
      },
      'test',
    );
    const activities = createEnvironmentActivities({
      store,
      artifacts: new LocalArtifactStore(path.join(dir, 'artifacts')),
      runs: fixedRunDeps(config),
    });
    const request = { runId: 'r', configHash: 'c', iteration: 1, taskIds: ['t1', 't2', 't3', 't4'] };
    const plan = await activities.planVariants(request);
    expect(plan).toEqual({
      validation: [
        { variant: 'worded', taskIds: ['t1:worded', 't2:worded'] },
        { variant: 'broken', taskIds: ['t1:broken', 't2:broken'] },
        { variant: 'easy', taskIds: ['t1:easy', 't2:easy'] },
      ],
      samplesPerTask: 2,
      trainTaskIds: request.taskIds,
      kept: [],
      proposed: [],
    });
    const rewards = { worded: [1, 0, null, 1], broken: [0, 0, 0, 0], easy: [1, 1, 1, 1] };
    for (const [variant, values] of Object.entries(rewards))
      for (const [i, reward] of values.entries())
        await scored(
          store,
          `r.it1-validate.t${1 + (i >> 1)}:${variant}.${i % 2}`,
          `t${1 + (i >> 1)}:${variant}`,
          reward,
        );

    const input = { ...request, batchId: 'r.it1-validate', samplesPerTask: 2, validation: plan?.validation ?? [] };
    const kept = await activities.keepVariants(input);
    expect(kept.verdicts.map((v) => [v.name, v.kept, v.reason])).toEqual([
      ['worded', true, expect.stringMatching(/^solved by 2 of 3 samples .*kept/)],
      ['broken', false, expect.stringMatching(/solved by no sample/)],
      ['easy', false, expect.stringMatching(/solved by every sample/)],
    ]);
    expect(kept.trainTaskIds).toEqual(curriculumTaskIds(request.taskIds, ['worded'], 0.5, 1));
    const worded = { name: 'worded', id: kept.verdicts[0]?.id, origin: 'declared', why: 'declared in config' };
    expect(kept.kept).toEqual([worded]);
    // Judged once per run: later iterations plan without checking again, and a retry keeps the verdicts.
    const later = await activities.planVariants({ ...request, iteration: 2 });
    expect(later).toEqual({
      validation: [],
      samplesPerTask: 2,
      trainTaskIds: curriculumTaskIds(request.taskIds, ['worded'], 0.5, 2),
      kept: [worded],
      proposed: [],
    });
    expect((await activities.keepVariants(input)).verdicts).toEqual(kept.verdicts);
    expect(
      await createEnvironmentActivities({
        store,
        artifacts: new LocalArtifactStore(dir),
        runs: fixedRunDeps(validateConfig({}, 'test')),
      }).planVariants(request),
    ).toBeNull();
    await store.close();
  });

  it('runs the rigger after the training rollouts: its proposals are checked by the next iteration', async () => {
    const store = new SqliteTraceStore(path.join(dir, 'rigged.sqlite'));
    const config = validateConfig(
      {
        environment: {
          module,
          rigger: { proposals: 2, thresholds: { minCount: 2 } },
          validation: { samples: 2, tasks: 1 },
        },
      },
      'test',
    );
    const activities = createEnvironmentActivities({
      store,
      artifacts: new LocalArtifactStore(path.join(dir, 'rigged-artifacts')),
      runs: fixedRunDeps(config),
    });
    const taskIds = ['t1', 't2', 't3', 't4'];
    // Iteration 1's training rollouts: the runs whose calc calls failed did not answer right.
    for (const [i, task] of taskIds.entries())
      for (const sample of [0, 1]) {
        const errors = i < 2 ? 2 : 0;
        await trained(store, `r.it1.${task}.${sample}`, task, errors === 0 ? 1 : 0, { calls: 3, errors });
      }
    const request = { runId: 'r', configHash: 'c', iteration: 1, taskIds, batchId: 'r.it1', samplesPerTask: 2 };
    expect(await activities.planVariants(request)).toMatchObject({ validation: [], kept: [], proposed: [] });
    const assessed = await activities.assessVariants(request);
    expect(assessed.used).toEqual([
      expect.objectContaining({ name: 'original', id: null, rollouts: 8, scored: 8, solved: 4, meanReward: 0.5 }),
    ]);
    expect(assessed.rigger?.weaknesses.map((w) => [w.kind, w.subject])).toContainEqual(['tool_errors', 'calc']);
    const proposals = assessed.rigger?.proposals ?? [];
    // One aimed at each weakness in turn: the flaky tool, and the tasks failing every sample
    // (the module's stateParams).
    expect(proposals.map((p) => p.name)).toEqual(['flaky-calc-every-3', 'state-scale-3']);
    expect(proposals[0]).toMatchObject({
      aimedAt: { kind: 'tool_errors', subject: 'calc' },
      why: expect.stringMatching(/retrying pays/),
    });
    // A retry reads the report back; the next iteration checks the proposals like declared variants.
    expect(await activities.assessVariants(request)).toEqual(assessed);
    const next = await activities.planVariants({ ...request, iteration: 2 });
    expect(next?.validation).toEqual([
      { variant: 'flaky-calc-every-3', taskIds: ['t1:flaky-calc-every-3'] },
      { variant: 'state-scale-3', taskIds: ['t1:state-scale-3'] },
    ]);
    expect(next?.proposed.map((v) => [v.name, v.rules ?? v.state])).toEqual([
      ['flaky-calc-every-3', { transientErrors: { every: 3, tools: ['calc'] } }],
      ['state-scale-3', { scale: 3 }],
    ]);
    await store.close();
  });
});

describe("the rigger's LLM", () => {
  it('is asked through the gateway: its call is journaled under the rigger rollout, its valid proposals come first', async () => {
    const t = await startTestGateway();
    try {
      const answer = [
        {
          name: 'flaky-calc-llm',
          weakness: { kind: 'tool_errors', subject: 'calc' },
          why: 'a retry after a failed calc call pays',
          rules: { transientErrors: { every: 4, tools: ['calc'] } },
        },
        {
          name: 'gone',
          weakness: { kind: 'tool_errors', subject: 'calc' },
          why: '-',
          rules: { removeTool: { tool: 'calc', alternative: 'abacus' } },
        },
      ];
      t.backend.scripts.set('rigger-llm', (res, body) => {
        const content = `Proposals:\n${JSON.stringify(answer)}`;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            id: 'chatcmpl-rigger',
            object: 'chat.completion',
            created: 1,
            model: body.model,
            choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 },
          }),
        );
      });
      t.gateway.router.registerPolicy('rigger-llm', { backend: 'toy', model: 'rigger-llm' });
      const config = validateConfig(
        {
          environment: {
            module,
            rigger: { proposals: 2, thresholds: { minCount: 2 }, llm: { model: 'rigger-llm' } },
          },
        },
        'test',
      );
      const activities = createEnvironmentActivities({
        store: t.store,
        artifacts: new LocalArtifactStore(path.join(dir, 'llm-artifacts')),
        runs: fixedRunDeps(config),
        gateway: new GatewayControlClient(t.gateway.url, ADMIN_KEY),
      });
      const taskIds = ['t1', 't2', 't3', 't4'];
      for (const [i, task] of taskIds.entries())
        for (const sample of [0, 1])
          await trained(t.store, `l.it1.${task}.${sample}`, task, i < 2 ? 0 : 1, { calls: 3, errors: i < 2 ? 2 : 0 });
      const request = { runId: 'l', configHash: 'c', iteration: 1, taskIds, batchId: 'l.it1', samplesPerTask: 2 };
      const assessed = await activities.assessVariants(request);
      expect(assessed.rigger?.proposals.map((p) => [p.name, p.by])).toEqual([
        ['flaky-calc-llm', 'llm'],
        ['flaky-calc-every-3', 'rules'],
      ]);
      expect(assessed.rigger?.llm).toEqual({ model: 'rigger-llm', rolloutId: 'l.rigger.it1', proposed: 1, refused: 1 });
      // The call is in the journal like a harness's, under a finished rollout of mode rigger.
      expect(await t.store.getRollout('l.rigger.it1')).toMatchObject({ mode: 'rigger', status: 'succeeded' });
      const [call] = await t.store.listCalls('l.rigger.it1');
      expect(JSON.stringify(call?.requestReceived)).toContain('tool_errors | calc');
      // The report keeps why the rest was refused; a retried activity reads it back and asks nothing.
      const report = JSON.parse(readFileSync(path.join(dir, 'llm-artifacts', 'runs/l/rigger/it1.json'), 'utf8'));
      expect(report.llm.refused).toEqual([
        { item: expect.stringContaining('"gone"'), why: `"abacus" is not one of the environment's tools (calc)` },
      ]);
      expect(await activities.assessVariants(request)).toEqual(assessed);
      expect(await t.store.listCalls('l.rigger.it1')).toHaveLength(1);
    } finally {
      await t.close();
    }
  });
});

/** A training rollout with its verifier's reward and the `environment` event its attempt recorded. */
async function trained(
  store: TraceStore,
  id: string,
  taskId: string,
  reward: number,
  calc: { calls: number; errors: number },
) {
  await store.createRollout({ id, taskId, metadata: { sample: Number(id.split('.').at(-1)) } });
  await store.setRolloutStatus(id, { status: 'running' }, 'admin');
  const summary = {
    environment: 'calculator',
    variant: null,
    steps: calc.calls,
    errors: calc.errors,
    byTool: { calc },
    done: false,
  };
  await store.appendEvent(id, 1, { type: 'custom', name: 'environment', data: summary }, 'admin');
  await store.appendEvent(id, 1, { type: 'reward', value: reward, components: { success: reward } }, 'admin');
  await store.setRolloutStatus(id, { status: 'succeeded' }, 'admin');
}
