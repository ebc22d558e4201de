import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Action, Step, ToolSpec } from '../contract.js';
import { type RulesSpec, rulesSchema } from '../variant-spec.js';
import { newRuleState, offeredTools, type RuledStep, type RuleState, rulesProblems, stepWithRules } from './rules.js';

/**
 * A small real environment for the rules to wrap: `calculator` (and its old name `calc`) adds
 * numbers, `search` returns a long text it is given, and every step counts itself in the state,
 * so a test sees exactly which calls reached the environment.
 */
interface Counted {
  calls: Action[];
}
const TOOLS = ['calculator', 'calc', 'search'];
const toolSpecs: ToolSpec[] = TOOLS.map((name) => ({ type: 'function', function: { name } }));

function environmentStep(state: Counted, action: Action): Step<Counted> {
  const next = { calls: [...state.calls, action] };
  if (action.tool === 'search') return { state: next, observation: String(action.arguments.text ?? ''), done: false };
  const numbers = String(action.arguments.expression ?? '')
    .split('+')
    .map(Number);
  return { state: next, observation: String(numbers.reduce((a, b) => a + b, 0)), done: false };
}

/** A session: the environment's state and the rule state, calls made one after another. */
function session(rulesInput: RulesSpec | undefined) {
  const rules = rulesInput === undefined ? undefined : rulesSchema.parse(rulesInput);
  let env: Counted = { calls: [] };
  const ruleState: RuleState = newRuleState();
  const call = (tool: string, args: Record<string, unknown> = {}): RuledStep<Counted> =>
    stepWithRules(rules, ruleState, { tool, arguments: args }, (action) => {
      const step = environmentStep(env, action);
      env = step.state;
      return step;
    });
  return { call, ruleState, reached: () => env.calls };
}

describe('rulesProblems', () => {
  it('accepts rules that name the environment’s tools and a pattern that compiles', () => {
    const rules: RulesSpec = {
      strictFormat: { tool: 'calculator', argument: 'expression', pattern: '\\d+(\\+\\d+)*', hint: 'digits and +' },
      removeTool: { tool: 'calc', alternative: 'calculator' },
      transientErrors: { every: 3, tools: ['search'] },
      rateLimit: { calls: 5, cooldown: 2 },
      paging: { pageSize: 100 },
    };
    expect(rulesProblems(rules, TOOLS)).toEqual([]);
    expect(rulesProblems(undefined, TOOLS)).toEqual([]);
  });

  it('names the field and the fix for each bad part', () => {
    const problems = rulesProblems(
      {
        strictFormat: { tool: 'calc', argument: 'x', pattern: '(unclosed', hint: 'h' },
        removeTool: { tool: 'calc', alternative: 'calc' },
        transientErrors: { every: 2, tools: [] },
      },
      TOOLS,
    );
    expect(problems).toEqual([
      expect.stringMatching(/^rules\.strictFormat\.pattern does not compile .*fix it$/),
      expect.stringMatching(/^rules\.removeTool\.alternative must differ .*name a tool left$/),
      expect.stringMatching(/^rules\.strictFormat\.tool "calc" is the removed tool.*pick another tool$/),
      expect.stringMatching(/^rules\.transientErrors\.tools is empty.*leave it out for all$/),
    ]);
  });

  it('reports a tool the environment does not have, in whichever field it is, listing the real ones', () => {
    const fields = ['strictFormat.tool', 'removeTool.tool', 'removeTool.alternative', 'transientErrors.tools'] as const;
    const unknownTool = fc.stringMatching(/^[a-z_]{1,12}$/).filter((t) => !TOOLS.includes(t));
    fc.assert(
      fc.property(fc.constantFrom(...fields), unknownTool, (field, tool) => {
        const rules: RulesSpec = {
          'strictFormat.tool': { strictFormat: { tool, argument: 'a', pattern: '.*', hint: 'h' } },
          'removeTool.tool': { removeTool: { tool, alternative: 'calculator' } },
          'removeTool.alternative': { removeTool: { tool: 'calc', alternative: tool } },
          'transientErrors.tools': { transientErrors: { every: 2, tools: ['search', tool] } },
        }[field];
        expect(rulesProblems(rulesSchema.parse(rules), TOOLS)).toEqual([
          `rules.${field} "${tool}" is not a tool of the environment; the environment's tools are "calculator", "calc", "search"`,
        ]);
      }),
    );
  });
});

describe('removeTool', () => {
  it('offers the tools without the removed one, and answers its calls with the alternative', () => {
    const rules = { removeTool: { tool: 'calc', alternative: 'calculator' } };
    expect(offeredTools(rules, toolSpecs).map((t) => t.function.name)).toEqual(['calculator', 'search']);
    expect(offeredTools(undefined, toolSpecs)).toBe(toolSpecs);
    const s = session(rules);
    expect(s.call('calc', { expression: '1+2' })).toEqual({
      observation: 'error: tool "calc" is not available; use "calculator" instead',
      done: false,
      error: true,
      step: null,
    });
    expect(s.call('calculator', { expression: '1+2' })).toMatchObject({ observation: '3', error: false });
    expect(s.reached()).toEqual([{ tool: 'calculator', arguments: { expression: '1+2' } }]);
  });
});

describe('strictFormat', () => {
  const rules = {
    strictFormat: { tool: 'calculator', argument: 'expression', pattern: '\\d+(\\+\\d+)*', hint: 'digits joined by +' },
  };

  it('refuses an argument that does not match the pattern whole, without calling the environment', () => {
    const s = session(rules);
    for (const expression of ['1 + 2', '1+2 ', 'x1+2', undefined, 12]) {
      const args = expression === undefined ? {} : { expression };
      const answer = s.call('calculator', args);
      if (expression === 12) expect(answer).toMatchObject({ observation: '12', error: false });
      else expect(answer).toMatchObject({ observation: 'error: "expression" must be digits joined by +', error: true });
    }
    expect(s.call('calculator', { expression: '1+2' }).observation).toBe('3');
    expect(s.call('search', { text: 'other tools are not checked' }).error).toBe(false);
    expect(s.reached().map((a) => a.arguments)).toEqual([
      { expression: 12 },
      { expression: '1+2' },
      { text: 'other tools are not checked' },
    ]);
  });

  it('throws a clear error when the pattern was never checked and does not compile', () => {
    const bad = { strictFormat: { tool: 'calculator', argument: 'e', pattern: '(', hint: 'h' } };
    expect(() => session(bad).call('calculator', { e: '1' })).toThrow(/rules\.strictFormat\.pattern does not compile/);
  });
});

describe('rateLimit', () => {
  it('lets `calls` calls through, refuses the next `cooldown`, then starts over', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 6 }), (calls, cooldown) => {
        const s = session({ rateLimit: { calls, cooldown } });
        const refused = Array.from(
          { length: 3 * (calls + cooldown) },
          (_, i) => s.call('search', { text: `${i}` }).error,
        );
        const expected = refused.map((_, i) => i % (calls + cooldown) >= calls);
        expect(refused).toEqual(expected);
        expect(s.reached()).toHaveLength(3 * calls);
      }),
    );
    const s = session({ rateLimit: { calls: 1, cooldown: 1 } });
    expect(s.call('search', { text: 'first' }).observation).toBe('first');
    expect(s.call('search', { text: 'second' }).observation).toBe('error: rate limit exceeded; wait and try again');
  });
});

describe('transientErrors', () => {
  const TRANSIENT = 'error: temporarily unavailable (transient); try the same call again';
  const calls = fc.array(fc.record({ tool: fc.constantFrom(...TOOLS), n: fc.integer({ min: 0, max: 3 }) }), {
    maxLength: 40,
  });

  it('fails exactly every n-th call of its tools once; the retry of that call succeeds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 6 }), calls, fc.boolean(), (every, sequence, onlyCalculator) => {
        const counted = onlyCalculator ? ['calculator'] : TOOLS;
        const s = session({ transientErrors: { every, ...(onlyCalculator ? { tools: ['calculator'] } : {}) } });
        let countedSoFar = 0;
        for (const { tool, n } of sequence) {
          const args = tool === 'search' ? { text: `${n}` } : { expression: `${n}+1` };
          const answer = s.call(tool, args);
          if (counted.includes(tool)) countedSoFar += 1;
          const shouldFail = counted.includes(tool) && countedSoFar % every === 0;
          expect(answer.error).toBe(shouldFail);
          if (!shouldFail) continue;
          expect(answer).toMatchObject({ observation: TRANSIENT, step: null });
          expect(s.call(tool, args)).toMatchObject({ error: false, step: expect.anything() });
        }
        expect(s.reached()).toHaveLength(sequence.length);
      }),
    );
  });

  it('lets the failed call through when it comes back later, after other calls', () => {
    const s = session({ transientErrors: { every: 2 } });
    s.call('search', { text: 'a' });
    expect(s.call('search', { text: 'b' }).observation).toBe(TRANSIENT);
    expect(s.call('search', { text: 'c' }).error).toBe(false);
    expect(s.call('search', { text: 'd' }).error).toBe(true);
    expect(s.call('search', { text: 'b' }).observation).toBe('b');
    expect(s.call('search', { text: 'd' }).observation).toBe('d');
  });
});

/** The pages of a paged reply pasted together, markers removed, reading pages 2… as the marker says. */
function readAllPages(s: ReturnType<typeof session>, first: RuledStep<Counted>, tool: string): string {
  const stripped = (reply: string) => reply.replace(/\n\[page \d+ of \d+; [^\n]*\]$/, '');
  const total = Number(/\n\[page 1 of (\d+);[^\n]*\]$/.exec(first.observation)?.[1] ?? 1);
  const pages = [first.observation];
  for (let page = 2; page <= total; page++) pages.push(s.call(tool, { page }).observation);
  return total === 1 ? first.observation : pages.map(stripped).join('');
}

describe('paging', () => {
  it('cuts long output into pages that concatenate to it exactly, read without calling again', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', maxLength: 600 }),
        fc.integer({ min: 20, max: 120 }),
        (text, pageSize) => {
          const s = session({ paging: { pageSize } });
          const first = s.call('search', { text });
          expect(readAllPages(s, first, 'search')).toBe(text);
          expect(s.reached()).toHaveLength(1);
        },
      ),
    );
  });

  it('tells the caller how to ask for more, and names the range when a page does not exist', () => {
    const s = session({ paging: { pageSize: 20 } });
    const text = 'x'.repeat(45);
    expect(s.call('search', { text }).observation).toBe(
      `${'x'.repeat(20)}\n[page 1 of 3; call search again with "page": 2 for more]`,
    );
    expect(s.call('search', { page: '3' }).observation).toBe(`xxxxx\n[page 3 of 3; no more pages]`);
    expect(s.call('search', { page: 4 }).observation).toBe(
      'error: there is no page 4: the last output of "search" has pages 1 to 3',
    );
    expect(s.call('search', { page: 0 }).observation).toBe('error: "page" must be a whole number from 1 to 3');
    expect(s.call('calculator', { page: 2 }).observation).toBe(
      'error: no earlier output of "calculator" to page through; call it without "page" first',
    );
    expect(s.call('search', { text: 'short' }).observation).toBe('short');
    expect(s.call('search', { page: 2 }).error).toBe(true);
  });

  it('treats page 1 as a fresh call and keeps `page` away from the environment', () => {
    const s = session({ paging: { pageSize: 20 } });
    s.call('search', { text: 'y'.repeat(30), page: 1 });
    expect(s.reached()).toEqual([{ tool: 'search', arguments: { text: 'y'.repeat(30) } }]);
  });
});

describe('several rules together', () => {
  it('applies removeTool, then page reads, strictFormat, rateLimit, transientErrors, the step, paging', () => {
    const s = session({
      removeTool: { tool: 'calc', alternative: 'calculator' },
      strictFormat: { tool: 'calculator', argument: 'expression', pattern: '[0-9+]+', hint: 'digits and +' },
      rateLimit: { calls: 3, cooldown: 1 },
      transientErrors: { every: 2 },
      paging: { pageSize: 20 },
    });
    const answers = [
      s.call('calc', { expression: '1+1' }), // removed: refused, counts nowhere
      s.call('calculator', { expression: 'one' }), // malformed: refused, counts nowhere
      s.call('search', { text: 'z'.repeat(30) }), // burst 1, transient count 1: paged
      s.call('search', { page: 2 }), // a page read: counts nowhere
      s.call('calculator', { expression: '2+2' }), // burst 2, transient count 2: fails
      s.call('calculator', { expression: '2+2' }), // burst 3 (cooldown next), the retry: succeeds
      s.call('calculator', { expression: '3+3' }), // cooldown: refused
      s.call('calculator', { expression: '3+3' }), // burst 1, transient count 3
    ].map((a) => a.observation);
    expect(answers).toEqual([
      'error: tool "calc" is not available; use "calculator" instead',
      'error: "expression" must be digits and +',
      `${'z'.repeat(20)}\n[page 1 of 2; call search again with "page": 2 for more]`,
      `${'z'.repeat(10)}\n[page 2 of 2; no more pages]`,
      'error: temporarily unavailable (transient); try the same call again',
      '4',
      'error: rate limit exceeded; wait and try again',
      '6',
    ]);
    expect(s.reached()).toHaveLength(3);
  });

  it('answers the same calls the same way, also from a rule state that went through JSON', () => {
    const rules: RulesSpec = {
      rateLimit: { calls: 2, cooldown: 1 },
      transientErrors: { every: 3 },
      paging: { pageSize: 20 },
    };
    const script = Array.from({ length: 24 }, (_, i) =>
      i % 5 === 4 ? { page: 2 } : { text: String(i).repeat(i + 3) },
    );
    const straight = session(rules);
    const expected = script.map((args) => straight.call('search', args));
    const journaled = session(rules);
    script.forEach((args, i) => {
      Object.assign(journaled.ruleState, JSON.parse(JSON.stringify(journaled.ruleState)) as RuleState);
      expect(journaled.call('search', args)).toEqual(expected[i]);
    });
    expect(
      stepWithRules(undefined, newRuleState(), { tool: 'search', arguments: { text: 'as is' } }, (a) =>
        environmentStep({ calls: [] }, a),
      ),
    ).toMatchObject({ observation: 'as is', error: false });
  });
});
