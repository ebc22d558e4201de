import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { environmentProblems } from './contract.js';
import { loadEnvironment } from './load.js';
import type { RolloutEvidence } from './rigger-evidence.js';
import { endedAttempt, rolloutEvidence } from './rollout-evidence.js';
import type { CallRecord } from '../store/trace-store.js';
import { rig, runVariants, variantUse, DECLARED_WHY } from './run-variants.js';
import { environmentSchema } from './settings.js';
import { variantId } from './variant-spec.js';

const calculator = path.join(packageRoot(), 'examples', 'calculator-agent', 'environment.mjs');
const settings = environmentSchema.parse({ module: calculator, rigger: { proposals: 2, thresholds: { minCount: 2 } } });

const evidence = (over: Partial<RolloutEvidence>): RolloutEvidence => ({
  taskId: 't',
  iteration: 1,
  variant: null,
  reward: 0,
  success: false,
  failureClass: null,
  steps: 1,
  toolCalls: {},
  gaveUp: false,
  ...over,
});

describe("a run's variants and the rigger's turn", () => {
  it('checks stateParams against the contract: a list of objects, beside vary()', () => {
    const base = { name: 'e', version: '1', tools: [{ type: 'function', function: { name: 't' } }] };
    const env = { ...base, reset: () => ({}), step: () => ({}) };
    expect(environmentProblems({ ...env, stateParams: [{ a: 1 }] })).toEqual([
      '"stateParams" are parameters for vary(): give vary too, or remove stateParams',
    ]);
    expect(environmentProblems({ ...env, vary: () => ({}), stateParams: [1] })).toEqual([
      '"stateParams", when given, must be a list of objects (parameter sets for vary)',
    ]);
    expect(environmentProblems({ ...env, vary: () => ({}), stateParams: [{ a: 1 }] })).toEqual([]);
  });

  it("proposes the module's other worlds for tasks every sample fails, and never a variant the run has", async () => {
    const environment = await loadEnvironment(calculator);
    const failing = ['a', 'b', 'c'].flatMap((taskId) => [0, 1].map(() => evidence({ taskId })));
    const solved = ['d', 'e'].flatMap((taskId) => [0, 1].map(() => evidence({ taskId, reward: 1, success: true })));
    const declared = [{ name: 'bigger', state: { scale: 3 } }];
    const existing = runVariants(environment.id, declared, []);
    const report = await rig(environment, settings.rigger, 1, [...failing, ...solved], existing);
    expect(report.weaknesses.map((w) => w.kind)).toContain('task_failures');
    // { scale: 3 } is declared already (under another name): the next two of stateParams instead.
    expect(report.proposals.map((p) => p.spec.state)).toEqual([{ distractor: true }, { scale: 10, terms: 3 }]);
    expect(report.proposals[0]?.id).toBe(variantId(environment.id, report.proposals[0]!.spec));
    expect(report).toMatchObject({ iteration: 1, window: [1], rollouts: 10 });
    // The run's variants: declared first, then the proposals, each with where it came from.
    const variants = runVariants(environment.id, declared, [report]);
    expect(variants.map((v) => [v.spec.name, v.origin, v.proposedAfter])).toEqual([
      ['bigger', 'declared', undefined],
      [report.proposals[0]?.spec.name, 'rigger', 1],
      [report.proposals[1]?.spec.name, 'rigger', 1],
    ]);
    expect(variants[0]?.why).toBe(DECLARED_WHY);
    expect(variants[1]?.why).toMatch(/fail every sample/);
  });

  it("puts the LLM's valid proposals first, the rule table's after, and records what it refused", async () => {
    const environment = await loadEnvironment(calculator);
    const failing = ['a', 'b', 'c'].flatMap((taskId) => [0, 1].map(() => evidence({ taskId })));
    const solved = ['d', 'e'].flatMap((taskId) => [0, 1].map(() => evidence({ taskId, reward: 1, success: true })));
    const asked: string[] = [];
    const answer = [
      { name: 'bigger', state: { scale: 3 }, weakness: { kind: 'task_failures', subject: '3 tasks' }, why: 'harder' },
      { name: 'odd', rules: { paging: { pageSize: 50 } }, weakness: { kind: 'gives_up', subject: 'x' }, why: 'no' },
    ];
    const subject = (await rig(environment, settings.rigger, 1, [...failing, ...solved], [])).weaknesses[0]?.subject;
    answer[0]!.weakness.subject = subject ?? '';
    const llm = {
      model: 'production',
      rolloutId: 'r.rigger.it1',
      ask: async (messages: Array<{ content: string }>) => {
        asked.push(messages.map((m) => m.content).join('\n'));
        return { text: `Here you are:\n\`\`\`json\n${JSON.stringify(answer)}\n\`\`\`` };
      },
    };
    const report = await rig(environment, settings.rigger, 1, [...failing, ...solved], [], llm);
    expect(asked[0]).toContain(`task_failures | ${subject}`);
    expect(report.proposals.map((p) => [p.spec.name, p.by])).toEqual([
      ['bigger', 'llm'],
      [expect.stringMatching(/^state-/), 'rules'],
    ]);
    expect(report.proposals[0]?.why).toBe('LLM: harder');
    expect(report.llm).toEqual({
      model: 'production',
      rolloutId: 'r.rigger.it1',
      proposed: 1,
      refused: [
        { item: expect.stringContaining('"odd"'), why: 'aimed at gives_up "x", which is not a weakness found' },
      ],
    });
    // A failed call leaves the rule table's proposals, and says why.
    const failed = await rig(environment, settings.rigger, 1, [...failing, ...solved], [], {
      ...llm,
      ask: async () => ({ error: 'backend answered 503' }),
    });
    expect(failed.proposals.map((p) => p.by)).toEqual(['rules', 'rules']);
    expect(failed.llm).toMatchObject({ proposed: 0, error: 'backend answered 503' });
  });

  it('reads evidence from the journal and sums how training did in each environment', () => {
    const summary = (variant: string | null, steps: number) => ({
      id: 0,
      rolloutId: 'r',
      actionId: null,
      type: 'custom' as const,
      source: 'admin' as const,
      attempt: 1,
      at: '1970-01-01T00:00:00.000Z',
      payload: { name: 'environment', data: { environment: 'e', variant, steps, errors: 0, byTool: {}, done: false } },
    });
    const reward = (value: number) => ({
      id: 0,
      rolloutId: 'r',
      actionId: null,
      type: 'reward' as const,
      source: 'admin' as const,
      attempt: 1,
      at: '1970-01-01T00:00:00.000Z',
      payload: { value },
    });
    const rollout = (id: string, failureClass: 'model' | null = null, statusReason: string | null = null) => ({
      id,
      taskId: 't',
      attempts: 1,
      failureClass,
      statusReason,
    });
    const read = rolloutEvidence(
      [
        { rollout: rollout('a'), events: [summary(null, 4), reward(1)] },
        { rollout: rollout('b', 'model', 'model call c1 refused'), events: [summary(null, 1), reward(0)] },
        { rollout: rollout('c'), events: [summary('v-1', 6), reward(0.5)] },
        { rollout: rollout('d'), events: [] },
      ],
      3,
      1,
    );
    expect(read.map((e) => [e.variant, e.reward, e.success, e.steps, e.gaveUp, e.iteration])).toEqual([
      [null, 1, true, 4, false, 3],
      [null, 0, false, 1, true, 3],
      // No model call on record, no tool error: it stopped without an answer (a give-up).
      ['v-1', 0.5, false, 6, true, 3],
      [null, null, null, null, false, 3],
    ]);
    const variants = runVariants('e', [{ name: 'worded', observations: { template: '{observation}' } }], []);
    const used = variantUse(read, [{ ...variants[0]!, id: 'v-1' }]);
    expect(used.map((u) => [u.name, u.rollouts, u.scored, u.solved, u.meanReward])).toEqual([
      ['original', 3, 2, 1, 0.5],
      ['worded', 1, 1, 0, 0.5],
    ]);
  });

  it("reads the last reply: an answer, a tool call, or a refusal by the run's patterns", () => {
    const call = (message: Record<string, unknown>) =>
      ({ status: 'ok', response: { choices: [{ message }] } }) as unknown as CallRecord;
    const rollout = { id: 'r', taskId: 't', attempts: 1, failureClass: null, statusReason: null };
    const ended = (message: Record<string, unknown>) =>
      endedAttempt({ rollout, events: [], lastCall: call(message) }, false, [/I cannot/i]);
    expect(ended({ content: '42' })).toMatchObject({ answered: true, refused: false });
    expect(ended({ content: '', tool_calls: [{ id: 'c' }] })).toMatchObject({ answered: false, refused: false });
    expect(ended({ content: 'I cannot help with that' })).toMatchObject({ answered: true, refused: true });
    expect(ended({ content: null, refusal: 'no' })).toMatchObject({ answered: false, refused: true });
  });
});
