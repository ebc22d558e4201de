import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  isGiveUp,
  proposeVariants,
  typicalSolvedSteps,
  weaknessTable,
  weaknesses,
  type EndedAttempt,
  type RolloutEvidence,
} from './rigger.js';

const rollout = (over: Partial<RolloutEvidence> = {}): RolloutEvidence => ({
  taskId: 't1',
  iteration: 1,
  variant: null,
  reward: 1,
  success: true,
  failureClass: null,
  steps: 5,
  toolCalls: {},
  gaveUp: false,
  ...over,
});
const failure = (over: Partial<RolloutEvidence> = {}) =>
  rollout({ reward: 0, success: false, failureClass: 'harness', ...over });

/** 20 runs calling search 5 times and read 3 times; in half of them 4 search calls fail (40% of all). */
function flakySearchEvidence(): RolloutEvidence[] {
  return Array.from({ length: 20 }, (_, i) => {
    const hit = i < 10;
    const failed = hit ? i < 8 : i === 10;
    const toolCalls = { search: { calls: 5, errors: hit ? 4 : 0 }, read: { calls: 3, errors: 0 } };
    const base = { taskId: `t${i % 5}`, iteration: 1 + (i % 2), steps: 8, toolCalls };
    return failed ? failure(base) : rollout(base);
  });
}

describe('the rigger finds tool errors', () => {
  it('names a tool failing 40% of its calls, and proposes transient errors on it', () => {
    const found = weaknesses(flakySearchEvidence());
    const toolErrors = found.filter((w) => w.kind === 'tool_errors');
    expect(toolErrors).toHaveLength(1);
    expect(toolErrors[0]).toMatchObject({ subject: 'search', count: 40, share: 0.4, tools: ['search'] });
    expect(toolErrors[0]!.detail).toContain('40 of 100 search calls failed (40%)');
    expect(toolErrors[0]!.detail).toContain('failed 80% (8 of 10), the others 10% (1 of 10)');

    const proposals = proposeVariants(found, { tools: ['search', 'read'] }, []);
    const flaky = proposals.find((p) => p.aimedAt.kind === 'tool_errors');
    expect(flaky?.variant).toEqual({
      name: 'flaky-search-every-3',
      rules: { transientErrors: { every: 3, tools: ['search'] } },
    });
    expect(flaky?.why).toContain('search fails on 40% of its calls');
  });

  it('does not blame a tool whose errors the runs recover from', () => {
    const recovered = flakySearchEvidence().map((r) => rollout({ ...r, success: true, failureClass: null }));
    expect(weaknesses(recovered).filter((w) => w.kind === 'tool_errors')).toEqual([]);
  });

  it('leaves unscored rollouts (Rein’s machinery failing) out of the evidence', () => {
    const infrastructure = Array.from({ length: 10 }, () =>
      rollout({
        success: null,
        reward: null,
        failureClass: 'infrastructure',
        toolCalls: { search: { calls: 5, errors: 5 } },
      }),
    );
    expect(weaknesses(infrastructure)).toEqual([]);
  });
});

describe('give-ups and honest failures', () => {
  const attempt = (over: Partial<EndedAttempt>): EndedAttempt => ({
    success: false,
    failureClass: null,
    steps: 6,
    toolErrors: 0,
    answered: true,
    refused: false,
    ...over,
  });

  it('tells a give-up from an honest failure', () => {
    expect(isGiveUp(attempt({ refused: true, failureClass: 'model' }), 6)).toBe(true);
    expect(isGiveUp(attempt({ answered: false }), null)).toBe(true);
    expect(isGiveUp(attempt({ steps: 2 }), 6)).toBe(true);
    // Did most of the work and answered wrong: an honest failure.
    expect(isGiveUp(attempt({ steps: 4 }), 6)).toBe(false);
    // Stopped after tool errors, without answering, at a normal length: it tried.
    expect(isGiveUp(attempt({ answered: false, toolErrors: 2 }), 6)).toBe(false);
    // Stopped from outside or by a crash: not the agent quitting.
    expect(isGiveUp(attempt({ steps: 1, failureClass: 'timeout' }), 6)).toBe(false);
    expect(isGiveUp(attempt({ answered: false, failureClass: 'harness' }), 6)).toBe(false);
    expect(isGiveUp(attempt({ steps: 1, failureClass: 'infrastructure' }), 6)).toBe(false);
    expect(isGiveUp(attempt({ success: true, steps: 1 }), 6)).toBe(false);
    expect(isGiveUp(attempt({ steps: null }), 6)).toBe(false);
  });

  it("reads a task's typical solved run as the median of its solved runs' steps", () => {
    const typical = typicalSolvedSteps([
      { taskId: 'a', success: true, steps: 4 },
      { taskId: 'a', success: true, steps: 9 },
      { taskId: 'a', success: true, steps: 6 },
      { taskId: 'a', success: false, steps: 1 },
      { taskId: 'b', success: false, steps: 3 },
    ]);
    expect([...typical]).toEqual([['a', 6]]);
  });

  it('reports give-ups as a weakness only when many failures are give-ups', () => {
    const solved = Array.from({ length: 10 }, (_, i) => rollout({ taskId: `s${i}` }));
    const quitting = Array.from({ length: 10 }, (_, i) => failure({ taskId: `f${i}`, steps: 1, gaveUp: i < 6 }));
    const givesUp = weaknesses([...solved, ...quitting]).find((w) => w.kind === 'gives_up');
    expect(givesUp).toMatchObject({ count: 6, share: 0.6, severity: 0.3 });
    expect(givesUp?.detail).toContain('6 of 10 failures (60%) were give-ups');

    const honest = Array.from({ length: 10 }, (_, i) => failure({ taskId: `f${i}`, gaveUp: i < 1 }));
    expect(weaknesses([...solved, ...honest]).some((w) => w.kind === 'gives_up')).toBe(false);
  });
});

describe('long episodes, hopeless tasks and malformed output', () => {
  it('finds solved runs far longer than the median, and the tools they lean on', () => {
    const quick = Array.from({ length: 10 }, (_, i) =>
      rollout({
        taskId: `q${i}`,
        steps: 4,
        toolCalls: { list: { calls: 2, errors: 0 }, read: { calls: 2, errors: 0 } },
      }),
    );
    const slow = Array.from({ length: 3 }, (_, i) =>
      rollout({
        taskId: `s${i}`,
        steps: 12,
        toolCalls: { read: { calls: 9, errors: 0 }, list: { calls: 3, errors: 0 } },
      }),
    );
    const long = weaknesses([...quick, ...slow]).find((w) => w.kind === 'long_episodes');
    expect(long).toMatchObject({ count: 3, tools: ['read', 'list'] });
    expect(long?.detail).toContain("took over 2× the median solved run's 4 steps (up to 12)");
    const proposals = proposeVariants(long ? [long] : [], { tools: ['list', 'read'] }, []);
    expect(proposals.map((p) => p.variant)).toEqual([
      { name: 'noise-3', observations: { noise: { lines: 3 } } },
      { name: 'reordered', observations: { reorder: true } },
    ]);
  });

  it('groups tasks failing every sample, and proposes a state variant only when one is declared', () => {
    const evidence = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].flatMap((taskId) =>
      [1, 2].map((iteration) => (taskId < 'd' ? failure({ taskId, iteration }) : rollout({ taskId, iteration }))),
    );
    const hopeless = weaknesses(evidence).find((w) => w.kind === 'task_failures');
    expect(hopeless).toMatchObject({ subject: '3 tasks', count: 3, tasks: ['a', 'b', 'c'] });
    expect(proposeVariants(hopeless ? [hopeless] : [], { tools: ['read'] }, [])).toEqual([]);
    const [state] = proposeVariants(
      hopeless ? [hopeless] : [],
      { tools: ['read'], stateParams: [{ services: 2 }] },
      [],
    );
    expect(state?.variant).toEqual({ name: 'state-services-2', state: { services: 2 } });
  });

  it('counts malformed output, and proposes nothing for it', () => {
    const evidence = [
      ...Array.from({ length: 4 }, (_, i) => failure({ taskId: `p${i}`, failureClass: 'policy_output' })),
      ...Array.from({ length: 4 }, (_, i) => rollout({ taskId: `s${i}` })),
    ];
    const format = weaknesses(evidence).find((w) => w.kind === 'format');
    expect(format).toMatchObject({ subject: 'policy_output', count: 4, share: 1, severity: 0.5 });
    expect(proposeVariants(format ? [format] : [], { tools: ['read'] }, [])).toEqual([]);
  });

  it('writes the weaknesses as a Markdown table', () => {
    const table = weaknessTable(weaknesses(flakySearchEvidence()));
    expect(table.split('\n').slice(0, 3)).toEqual([
      '| kind | subject | evidence | share |',
      '|---|---|---|---|',
      expect.stringMatching(/^\| tool_errors \| search \| 40 of 100 search calls failed .* \| 40% \|$/),
    ]);
    expect(weaknessTable([])).toBe('No recurring weakness with enough support.');
  });
});

const anyRollout = fc.record({
  taskId: fc.constantFrom('a', 'b', 'c', 'd'),
  iteration: fc.integer({ min: 1, max: 3 }),
  variant: fc.constantFrom(null, 'v-1'),
  reward: fc.constantFrom(null, 0, 1),
  success: fc.constantFrom(null, true, false),
  failureClass: fc.constantFrom(null, 'harness', 'policy_output', 'timeout', 'infrastructure'),
  steps: fc.option(fc.integer({ min: 0, max: 30 })),
  toolCalls: fc.dictionary(
    fc.constantFrom('search', 'read', 'list'),
    fc
      .integer({ min: 0, max: 6 })
      .chain((calls) => fc.record({ calls: fc.constant(calls), errors: fc.integer({ min: 0, max: calls }) })),
  ),
  gaveUp: fc.boolean(),
});
const anyOptions = fc.record({
  minCount: fc.integer({ min: 1, max: 6 }),
  minShare: fc.double({ min: 0, max: 1, noNaN: true }),
  longFactor: fc.double({ min: 1, max: 4, noNaN: true }),
  minSamplesPerTask: fc.integer({ min: 1, max: 4 }),
});

describe('weaknesses, for any evidence', () => {
  it('keeps none below the support thresholds, and sorts them by severity', () => {
    fc.assert(
      fc.property(fc.array(anyRollout, { maxLength: 40 }), anyOptions, (evidence, options) => {
        const found = weaknesses(evidence, options);
        for (const w of found) {
          expect(w.count).toBeGreaterThanOrEqual(options.minCount);
          expect(w.share).toBeGreaterThanOrEqual(options.minShare);
          expect(w.share).toBeLessThanOrEqual(1);
          expect(w.severity).toBeGreaterThanOrEqual(0);
          expect(w.severity).toBeLessThanOrEqual(1);
        }
        found.slice(1).forEach((w, i) => expect(w.severity).toBeLessThanOrEqual(found[i]!.severity));
      }),
    );
  });

  it('finds the same weaknesses whatever order the rollouts come in', () => {
    const evidenceAndShuffle = fc
      .array(anyRollout, { maxLength: 30 })
      .chain((evidence) =>
        fc.tuple(
          fc.constant(evidence),
          fc.shuffledSubarray(evidence, { minLength: evidence.length, maxLength: evidence.length }),
        ),
      );
    fc.assert(
      fc.property(evidenceAndShuffle, ([evidence, shuffled]) => {
        expect(weaknesses(shuffled)).toEqual(weaknesses(evidence));
      }),
    );
  });

  it('names a bad option and its bounds', () => {
    expect(() => weaknesses([], { minShare: 2 })).toThrow(/rigger options: minShare/);
  });
});
