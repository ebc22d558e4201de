import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UNSCORED_FAILURE_CLASSES, type FailureClass } from '../rollouts/rollout.js';
import { gateRulesSchema, type GateRules } from './config.js';
import { evaluateGate, GateInputError, pairOutcomes, severityOf } from './gate.js';
import type { RolloutFacts } from './rollout-facts.js';

function facts(side: string, taskId: string, sample: number, over: Partial<RolloutFacts> = {}): RolloutFacts {
  return {
    rolloutId: `${side}-${taskId}-${sample}`,
    taskId,
    sample,
    policyVersion: side,
    status: 'succeeded',
    reward: 1,
    failureClass: null,
    tokens: 1000,
    steps: 4,
    latencyMs: 2000,
    attempts: 1,
    toolErrors: 0,
    interventions: 0,
    rewardDisagrees: false,
    ...over,
  };
}

function failed(
  side: string,
  taskId: string,
  sample: number,
  failureClass: FailureClass | null = 'model',
  over: Partial<RolloutFacts> = {},
): RolloutFacts {
  // The policy's own failures are scored (reward 0 here); the machinery's are not.
  const unscored = failureClass !== null && UNSCORED_FAILURE_CLASSES.includes(failureClass);
  return facts(side, taskId, sample, { status: 'failed', reward: unscored ? null : 0, failureClass, ...over });
}

/** n tasks x k samples; `accepts(task, sample)` says whether that rollout is accepted. */
function replay(
  side: string,
  n: number,
  k: number,
  accepts: (task: number, sample: number) => boolean,
  over: (task: number, sample: number) => Partial<RolloutFacts> = () => ({}),
): RolloutFacts[] {
  const out: RolloutFacts[] = [];
  for (let t = 0; t < n; t++) {
    for (let s = 0; s < k; s++) {
      const id = `t${t}`;
      out.push(accepts(t, s) ? facts(side, id, s, over(t, s)) : failed(side, id, s, 'model', over(t, s)));
    }
  }
  return out;
}

const defaults = gateRulesSchema.parse({});
const rules = (input: object = {}): GateRules => gateRulesSchema.parse(input);
const check = (decision: ReturnType<typeof evaluateGate>, name: string) =>
  decision.checks.find((c) => c.name === name)!;

describe('gate rules', () => {
  it('default to the documented rules', () => {
    expect(defaults).toEqual({
      samplesPerTask: 1,
      acceptReward: 1,
      gain: { test: 'bootstrap', minGain: 0, confidence: 0.95, alpha: 0.05, resamples: 2000, seed: 1 },
      severity: { irreversible: 'critical', permission: 'critical' },
      maxRegression: { tokens: 0.25, steps: 0.25, latency: 0.5 },
      minScoredShare: 0.9,
      maxRewardDisagreement: 0.05,
    });
  });

  it('refuse unknown keys and unknown failure classes', () => {
    expect(() => gateRulesSchema.parse({ extra: 1 })).toThrow();
    expect(() => gateRulesSchema.parse({ gain: { tset: 'mcnemar' } })).toThrow();
    expect(() => gateRulesSchema.parse({ severity: { nosuchclass: 'critical' } })).toThrow();
    expect(() => gateRulesSchema.parse({ gain: { confidence: 0.4 } })).toThrow();
  });

  it('keep default severities for classes the config does not name', () => {
    const configured = rules({ severity: { tool: 'critical', permission: 'major' } });
    expect(severityOf(configured, 'tool')).toBe('critical');
    expect(severityOf(configured, 'permission')).toBe('major');
    expect(severityOf(configured, 'irreversible')).toBe('critical');
    expect(severityOf(defaults, 'timeout')).toBe('minor');
  });

  it('convert to a JSON schema that documents each field', () => {
    const schema = z.toJSONSchema(gateRulesSchema, { io: 'input' }) as {
      properties: Record<string, { description?: string; properties?: Record<string, { description?: string }> }>;
    };
    for (const [name, field] of Object.entries(schema.properties)) {
      expect(field.description, name).toBeTruthy();
      for (const [inner, sub] of Object.entries(field.properties ?? {}))
        expect(sub.description, `${name}.${inner}`).toBeTruthy();
    }
  });

  it('allow a cost limit to be switched off', () => {
    const r = rules({ maxRegression: { latency: null } });
    expect(r.maxRegression).toEqual({ tokens: 0.25, steps: 0.25, latency: null });
  });
});

describe('pairing', () => {
  it('matches rollouts on task and sample', () => {
    const pairs = pairOutcomes(
      [facts('inc', 'a', 0), facts('inc', 'a', 1)],
      [facts('cand', 'a', 1), facts('cand', 'a', 0)],
    );
    expect(pairs.map((p) => [p.taskId, p.sample, p.incumbent.rolloutId, p.candidate.rolloutId])).toEqual([
      ['a', 0, 'inc-a-0', 'cand-a-0'],
      ['a', 1, 'inc-a-1', 'cand-a-1'],
    ]);
  });

  it('names the task and sample of a rollout without a partner', () => {
    expect(() => pairOutcomes([facts('inc', 'a', 0), facts('inc', 'b', 2)], [facts('cand', 'a', 0)])).toThrow(
      /task b sample 2 has no candidate rollout/,
    );
    expect(() => pairOutcomes([facts('inc', 'a', 0)], [facts('cand', 'a', 0), facts('cand', 'a', 1)])).toThrow(
      /task a sample 1 has no incumbent rollout/,
    );
    expect(() => pairOutcomes([facts('inc', 'a', 0)], [facts('cand', 'a', 0), facts('cand2', 'a', 0)])).toThrow(
      GateInputError,
    );
  });

  it('refuses empty, duplicated and unfinished replays', () => {
    expect(() => pairOutcomes([], [])).toThrow(GateInputError);
    expect(() => pairOutcomes([facts('inc', 'a', 0)], [])).toThrow(/candidate: 0/);
    expect(() => pairOutcomes([facts('inc', 'a', 0), facts('inc2', 'a', 0)], [facts('cand', 'a', 0)])).toThrow(
      /two incumbent rollouts: inc-a-0 and inc2-a-0/,
    );
    expect(() => pairOutcomes([facts('inc', 'a', 0, { status: 'running' })], [facts('cand', 'a', 0)])).toThrow(
      /has not finished/,
    );
    expect(() => evaluateGate(defaults, [])).toThrow(GateInputError);
  });
});

describe('the gain check', () => {
  it('fails a degraded candidate with a reason naming the rates', () => {
    const incumbent = replay('inc', 40, 2, (t) => t < 30); // 75%
    const candidate = replay('cand', 40, 2, (t) => t < 15); // 37.5%
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(decision.verdict).toBe('fail');
    expect(check(decision, 'gain').passed).toBe(false);
    expect(decision.reasons).toHaveLength(1);
    expect(decision.reasons[0]).toMatch(/candidate accepted 37\.5% of 80 rollouts against the incumbent's 75\.0%/);
    expect(decision.evidence.acceptedRate).toEqual({ incumbent: 0.75, candidate: 0.375 });
    expect(decision.evidence.gain).toMatchObject({ test: 'bootstrap', estimate: -0.375, gained: 0, lost: 30 });
    expect(check(decision, 'gain').rollouts).toContain('cand-t20-1');
  });

  it('passes a clearly better candidate', () => {
    const incumbent = replay('inc', 40, 2, (t) => t < 15);
    const candidate = replay('cand', 40, 2, (t) => t < 32);
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(decision.reasons).toEqual([]);
    expect(decision.verdict).toBe('pass');
    expect(decision.checks.map((c) => c.name)).toEqual([
      'scored',
      'gain',
      'critical_failures',
      'tokens',
      'steps',
      'latency',
      'reward_disagreement',
    ]);
    expect(decision.evidence.gain!.lower).toBeGreaterThan(0);
    expect(decision.evidence).toMatchObject({ pairs: 80, tasks: 40 });
  });

  it('counts a crash after an unparsable model output against the candidate, as a harness crash', () => {
    // policy_output is the policy's own failure: scored (reward 0 here), so it loses pairs, never sets them aside.
    expect(UNSCORED_FAILURE_CLASSES).not.toContain('policy_output');
    const incumbent = replay('inc', 20, 1, () => true);
    const decisions = (['policy_output', 'harness'] as const).map((failureClass) =>
      evaluateGate(
        defaults,
        pairOutcomes(
          incumbent,
          incumbent.map((r) => failed('cand', r.taskId, r.sample, failureClass)),
        ),
      ),
    );
    for (const decision of decisions) {
      expect(decision.verdict).toBe('fail');
      expect(decision.evidence.scored.pairs).toBe(20);
      expect(decision.evidence.acceptedRate).toEqual({ incumbent: 1, candidate: 0 });
      expect(check(decision, 'critical_failures').passed).toBe(true);
    }
    expect(decisions[0]!.evidence.gain).toEqual(decisions[1]!.evidence.gain);
  });

  it('counts a failed rollout as not accepted, and uses acceptReward', () => {
    const pairs = pairOutcomes([facts('inc', 'a', 0, { reward: 0.6 })], [failed('cand', 'a', 0, 'timeout')]);
    expect(evaluateGate(rules({ acceptReward: 0.5 }), pairs).evidence.acceptedRate).toEqual({
      incumbent: 1,
      candidate: 0,
    });
    expect(evaluateGate(rules({ acceptReward: 0.7 }), pairs).evidence.acceptedRate).toEqual({
      incumbent: 0,
      candidate: 0,
    });
  });

  it('in McNemar mode, passes on significant gains and fails on too few', () => {
    const mcnemar = rules({ gain: { test: 'mcnemar' } });
    // 19 tasks gained, 1 lost: p = P(X >= 19 | n = 20) = 21/2^20.
    const incumbent = replay('inc', 30, 1, (t) => t === 0 || t >= 20);
    const candidate = replay('cand', 30, 1, (t) => t >= 1);
    const decision = evaluateGate(mcnemar, pairOutcomes(incumbent, candidate));
    expect(decision.verdict).toBe('pass');
    expect(decision.evidence.gain).toMatchObject({ test: 'mcnemar', gained: 19, lost: 1 });
    expect(decision.evidence.gain!.pValue).toBeLessThan(0.05);
    expect(decision.evidence.gain!.lower).toBeUndefined();
    expect(check(decision, 'gain').rollouts).toEqual(
      expect.arrayContaining(['inc-t0-0', 'cand-t0-0', 'inc-t5-0', 'cand-t5-0']),
    );
    expect(check(decision, 'gain').rollouts).toHaveLength(40);

    // 3 gained, 1 lost: p = 5/16, not below 0.05.
    const weak = evaluateGate(
      mcnemar,
      pairOutcomes(
        replay('inc', 10, 1, (t) => t === 0),
        replay('cand', 10, 1, (t) => t >= 1 && t <= 3),
      ),
    );
    expect(weak.verdict).toBe('fail');
    expect(weak.evidence.gain!.pValue).toBeCloseTo(5 / 16, 12);
    expect(weak.reasons[0]).toMatch(/McNemar p = 0\.31\d, not below alpha 0\.05/);
  });

  it('in McNemar mode, also needs the gain above minGain', () => {
    const strict = rules({ gain: { test: 'mcnemar', minGain: 0.5 } });
    const decision = evaluateGate(
      strict,
      pairOutcomes(
        replay('inc', 30, 1, () => false),
        replay('cand', 30, 1, (t) => t < 12),
      ),
    );
    expect(decision.evidence.gain!.pValue).toBeLessThan(0.05);
    expect(decision.verdict).toBe('fail');
    expect(decision.reasons[0]).toMatch(/not above \+50\.0 points/);
  });
});

describe('the critical failure check', () => {
  it('fails a better candidate that brings a new irreversible failure, listing its rollouts', () => {
    const incumbent = replay('inc', 40, 1, (t) => t < 15);
    const candidate = replay('cand', 40, 1, (t) => t < 35).map((r) =>
      r.taskId === 't37' || r.taskId === 't39' ? failed('cand', r.taskId, r.sample, 'irreversible') : r,
    );
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(check(decision, 'gain').passed).toBe(true);
    expect(decision.verdict).toBe('fail');
    expect(check(decision, 'critical_failures')).toMatchObject({
      passed: false,
      rollouts: ['cand-t37-0', 'cand-t39-0'],
    });
    expect(decision.reasons).toEqual([
      expect.stringMatching(/New critical failure class: irreversible in 2 of 40 candidate rollouts/),
    ]);
    expect(decision.evidence.failureClasses).toEqual({
      incumbent: { model: 25 },
      candidate: { model: 3, irreversible: 2 },
      newCritical: ['irreversible'],
    });
  });

  it('does not count a critical class the incumbent also shows as new', () => {
    const incumbent = replay('inc', 20, 1, (t) => t < 5).map((r) =>
      r.taskId === 't10' ? failed('inc', 't10', 0, 'permission') : r,
    );
    const candidate = replay('cand', 20, 1, (t) => t < 18).map((r) =>
      r.taskId === 't19' ? failed('cand', 't19', 0, 'permission') : r,
    );
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(decision.verdict).toBe('pass');
    expect(check(decision, 'critical_failures').detail).toMatch(/permission \(candidate 1, incumbent 1\)/);
    expect(decision.evidence.failureClasses!.newCritical).toEqual([]);
  });

  it('follows the configured severities', () => {
    const incumbent = replay('inc', 20, 1, (t) => t < 5);
    const candidate = replay('cand', 20, 1, (t) => t < 18).map((r) =>
      r.taskId === 't19' ? failed('cand', 't19', 0, 'tool') : r,
    );
    expect(evaluateGate(defaults, pairOutcomes(incumbent, candidate)).verdict).toBe('pass');
    const toolCritical = evaluateGate(rules({ severity: { tool: 'critical' } }), pairOutcomes(incumbent, candidate));
    expect(check(toolCritical, 'critical_failures')).toMatchObject({ passed: false, rollouts: ['cand-t19-0'] });
  });
});

describe('the cost checks', () => {
  const incumbent = replay('inc', 20, 1, (t) => t < 5);
  const better = (tokens: (t: number) => number) =>
    replay(
      'cand',
      20,
      1,
      (t) => t < 18,
      (t) => ({ tokens: tokens(t) }),
    );

  it('fail a token regression beyond the limit, listing the costliest rollouts', () => {
    const decision = evaluateGate(
      defaults,
      pairOutcomes(
        incumbent,
        better((t) => (t < 10 ? 1000 : 2000)),
      ),
    ); // +50%
    expect(decision.verdict).toBe('fail');
    expect(decision.reasons).toEqual([
      expect.stringMatching(
        /Cost regression \(tokens\): the candidate's mean of 1500 tokens per rollout against the incumbent's 1000 is \+50\.0%, over the allowed \+25\.0%/,
      ),
    ]);
    const tokens = check(decision, 'tokens');
    expect(tokens.rollouts).toHaveLength(10);
    expect(tokens.rollouts).toContain('cand-t15-0');
    expect(decision.evidence.meanTokens).toEqual({ incumbent: 1000, candidate: 1500 });
  });

  it('pass within the limit, and skip a switched-off limit', () => {
    expect(
      evaluateGate(
        defaults,
        pairOutcomes(
          incumbent,
          better((t) => (t < 16 ? 1000 : 2000)),
        ),
      ).verdict,
    ).toBe('pass'); // +20%
    const off = evaluateGate(
      rules({ maxRegression: { tokens: null } }),
      pairOutcomes(
        incumbent,
        better(() => 5000),
      ),
    );
    expect(off.verdict).toBe('pass');
    expect(off.checks.map((c) => c.name)).not.toContain('tokens');
    expect(off.evidence.meanTokens!.candidate).toBe(5000);
  });

  it('list at most 20 rollouts', () => {
    const big = replay(
      'cand',
      30,
      1,
      () => true,
      () => ({ latencyMs: 9000 }),
    );
    const decision = evaluateGate(
      defaults,
      pairOutcomes(
        replay('inc', 30, 1, () => false),
        big,
      ),
    );
    expect(check(decision, 'latency')).toMatchObject({ passed: false });
    expect(check(decision, 'latency').rollouts).toHaveLength(20);
  });

  it('treat any cost over an incumbent mean of 0 as a regression', () => {
    const inc = replay(
      'inc',
      10,
      1,
      () => false,
      () => ({ steps: 0 }),
    );
    const zero = evaluateGate(
      defaults,
      pairOutcomes(
        inc,
        replay(
          'cand',
          10,
          1,
          () => true,
          () => ({ steps: 0 }),
        ),
      ),
    );
    expect(check(zero, 'steps').passed).toBe(true);
    const some = evaluateGate(
      defaults,
      pairOutcomes(
        inc,
        replay(
          'cand',
          10,
          1,
          () => true,
          (t) => ({ steps: t === 0 ? 1 : 0 }),
        ),
      ),
    );
    expect(check(some, 'steps')).toMatchObject({ passed: false, rollouts: ['cand-t0-0'] });
    expect(some.reasons[0]).toMatch(/an increase from 0/);
  });
});

describe('the reward disagreement check', () => {
  it('fails when more of the candidate rollouts disagree than allowed', () => {
    const incumbent = replay('inc', 20, 1, (t) => t < 5);
    const candidate = replay(
      'cand',
      20,
      1,
      (t) => t < 18,
      (t) => ({ rewardDisagrees: t === 3 || t === 7 }),
    );
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(decision.verdict).toBe('fail');
    expect(check(decision, 'reward_disagreement')).toMatchObject({
      passed: false,
      rollouts: ['cand-t3-0', 'cand-t7-0'],
    });
    expect(decision.reasons[0]).toMatch(/2 of 20 candidate rollouts \(10\.0%\).*over the allowed 5\.0%/);
    expect(decision.evidence.rewardDisagreement).toEqual({ incumbent: 0, candidate: 0.1 });
    expect(evaluateGate(rules({ maxRewardDisagreement: 0.1 }), pairOutcomes(incumbent, candidate)).verdict).toBe(
      'pass',
    );
  });
});

describe('gate properties', () => {
  const replays = fc.array(
    fc.record({
      accepted: fc.boolean(),
      tokens: fc.integer({ min: 0, max: 5000 }),
      steps: fc.integer({ min: 0, max: 20 }),
      latencyMs: fc.integer({ min: 0, max: 60_000 }),
      disagrees: fc.boolean(),
    }),
    { minLength: 1, maxLength: 40 },
  );
  const toFacts = (
    side: string,
    rows: Array<{ accepted: boolean; tokens: number; steps: number; latencyMs: number; disagrees: boolean }>,
    k: number,
  ) =>
    rows.map((r, i) => {
      const base = { tokens: r.tokens, steps: r.steps, latencyMs: r.latencyMs, rewardDisagrees: r.disagrees };
      const task = `t${Math.floor(i / k)}`;
      return r.accepted ? facts(side, task, i % k, base) : failed(side, task, i % k, 'model', base);
    });

  it('never passes a candidate identical to the incumbent when minGain >= 0', () => {
    fc.assert(
      fc.property(
        replays,
        fc.integer({ min: 1, max: 4 }),
        fc.double({ min: 0, max: 0.5, noNaN: true }),
        fc.integer(),
        (rows, k, minGain, seed) => {
          const r = rules({ gain: { minGain, seed, resamples: 200 } });
          const decision = evaluateGate(r, pairOutcomes(toFacts('inc', rows, k), toFacts('cand', rows, k)));
          expect(decision.verdict).toBe('fail');
          expect(check(decision, 'gain').passed).toBe(false);
          expect(decision.evidence.gain).toMatchObject({ estimate: 0, lower: 0, upper: 0, gained: 0, lost: 0 });
        },
      ),
      { numRuns: 50 },
    );
  });

  it('decides the same way for the same seed, and negates the estimate when the policies swap', () => {
    fc.assert(
      fc.property(
        replays,
        replays,
        fc.integer({ min: 1, max: 3 }),
        fc.constantFrom<'bootstrap' | 'mcnemar'>('bootstrap', 'mcnemar'),
        (a, b, k, test) => {
          const n = Math.min(a.length, b.length);
          const inc = toFacts('inc', a.slice(0, n), k);
          const cand = toFacts('cand', b.slice(0, n), k);
          const r = rules({ gain: { test, resamples: 200, seed: 7 } });
          const decision = evaluateGate(r, pairOutcomes(inc, cand));
          expect(evaluateGate(r, pairOutcomes(inc, cand))).toEqual(decision);
          const swapped = evaluateGate(r, pairOutcomes(cand, inc));
          expect(swapped.evidence.gain!.estimate).toBeCloseTo(-decision.evidence.gain!.estimate, 12);
          expect(swapped.evidence.gain!.gained).toBe(decision.evidence.gain!.lost);
          expect(decision.checks.every((c) => typeof c.passed === 'boolean')).toBe(true);
          expect(decision.verdict === 'pass').toBe(decision.reasons.length === 0);
          expect(decision.reasons).toHaveLength(decision.checks.filter((c) => !c.passed).length);
        },
      ),
      { numRuns: 50 },
    );
  });

  it('leaves unscored rollouts out: they never decide a verdict, they can only make it insufficient', () => {
    const unscoredClasses = fc.constantFrom<FailureClass | 'cancelled'>(
      'infrastructure',
      'orchestrator',
      'verifier',
      'environment',
      'cancelled',
    );
    fc.assert(
      fc.property(
        replays,
        replays,
        fc.array(fc.tuple(fc.boolean(), fc.boolean(), unscoredClasses), { maxLength: 20 }),
        (a, b, lost) => {
          const n = Math.min(a.length, b.length);
          const inc = toFacts('inc', a.slice(0, n), 1);
          const cand = toFacts('cand', b.slice(0, n), 1);
          // Extra tasks where one side (or both) lost its rollout to a fault.
          const unscored = (side: string, task: string, cause: FailureClass | 'cancelled') =>
            cause === 'cancelled'
              ? facts(side, task, 0, { status: 'cancelled', reward: null })
              : failed(side, task, 0, cause);
          const extraInc = lost.map(([incLost, candLost, cause], i) =>
            incLost || !candLost ? unscored('inc', `x${i}`, cause) : facts('inc', `x${i}`, 0),
          );
          const extraCand = lost.map(([incLost, candLost, cause], i) =>
            candLost || !incLost ? unscored('cand', `x${i}`, cause) : facts('cand', `x${i}`, 0),
          );
          const r = rules({ gain: { resamples: 200 } });
          const scoredOnly = evaluateGate(r, pairOutcomes(inc, cand));
          const withLost = evaluateGate(r, pairOutcomes([...inc, ...extraInc], [...cand, ...extraCand]));
          expect(withLost.evidence.scored.pairs).toBe(n);
          if (n / (n + lost.length) >= r.minScoredShare) {
            expect(withLost.verdict).toBe(scoredOnly.verdict);
            expect(withLost.evidence.gain).toEqual(scoredOnly.evidence.gain);
          } else {
            expect(withLost.verdict).toBe('insufficient');
            expect(withLost.reasons).toEqual([check(withLost, 'scored').detail]);
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('unscored rollouts', () => {
  it('a base whose replay lost most rollouts to an outage gives an insufficient verdict, naming the causes', () => {
    // 32 tasks: both policies accept the same 8; an outage cost the incumbent 25 rollouts.
    const incumbent = replay('inc', 32, 1, (t) => t < 8).map((r, t) =>
      t >= 7 ? failed('inc', r.taskId, 0, t % 2 ? 'infrastructure' : 'orchestrator') : r,
    );
    const candidate = replay('cand', 32, 1, (t) => t < 8);
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(decision.verdict).toBe('insufficient');
    expect(decision.evidence.scored).toEqual({
      pairs: 7,
      unscored: { incumbent: { infrastructure: 13, orchestrator: 12 }, candidate: {} },
    });
    expect(decision.reasons[0]).toMatch(
      /^Insufficient evidence: 7 of 32 pairs \(21\.9%\) were scored on both sides; unscored rollouts: candidate none; incumbent 13 infrastructure, 12 orchestrator, below the required 90\.0%/,
    );
    expect(check(decision, 'scored').rollouts).toHaveLength(25);
    // Compared on the scored pairs only, the policies are equal: no task was "gained".
    expect(decision.evidence.gain).toMatchObject({ gained: 0, lost: 0 });
  });

  it('compares the scored pairs when enough were scored, and says how many were set aside', () => {
    const incumbent = replay('inc', 20, 1, () => false).map((r, t) =>
      t === 0 ? facts('inc', r.taskId, 0, { status: 'cancelled', reward: null }) : r,
    );
    const candidate = replay('cand', 20, 1, (t) => t < 4);
    const decision = evaluateGate(defaults, pairOutcomes(incumbent, candidate));
    expect(decision.evidence.scored.pairs).toBe(19);
    expect(decision.evidence.gain).toMatchObject({ gained: 3, lost: 0 });
    expect(check(decision, 'scored')).toMatchObject({ passed: true, rollouts: ['inc-t0-0'] });
  });

  it('with no pair scored on both sides there is nothing to compare', () => {
    const incumbent = replay('inc', 4, 1, () => true).map((r) => failed('inc', r.taskId, 0, 'infrastructure'));
    const decision = evaluateGate(
      defaults,
      pairOutcomes(
        incumbent,
        replay('cand', 4, 1, () => true),
      ),
    );
    expect(decision).toMatchObject({ verdict: 'insufficient', checks: [{ name: 'scored', passed: false }] });
    expect(decision.evidence.gain).toBeUndefined();
  });
});
