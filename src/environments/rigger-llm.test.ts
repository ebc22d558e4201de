import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Weakness } from './rigger-evidence.js';
import { readLlmProposals, riggerMessages } from './rigger-llm.js';
import { variantId, variantSchema } from './variant-spec.js';

const found: Weakness[] = [
  {
    kind: 'tool_errors',
    subject: 'search',
    detail: 'search fails on 40% of its calls',
    share: 0.4,
    count: 8,
    severity: 0.3,
    tools: [],
    tasks: [],
  },
  {
    kind: 'gives_up',
    subject: 'runs',
    detail: '60% of failures are give-ups',
    share: 0.6,
    count: 6,
    severity: 0.2,
    tools: [],
    tasks: [],
  },
];
const environment = { tools: ['search', 'read'], stateParams: [{ size: 'large' }] };
const existing = [{ name: 'paged', rules: { paging: { pageSize: 1000 } } }];
const item = (over: Record<string, unknown>) => ({
  name: 'flaky-search',
  weakness: { kind: 'tool_errors', subject: 'search' },
  why: 'retrying pays',
  rules: { transientErrors: { every: 2, tools: ['search'] } },
  ...over,
});
const read = (text: string, max = 4) => readLlmProposals(text, found, environment, existing, max);

describe("the rigger's LLM", () => {
  it('is asked with the weaknesses, the tools, the declared states and the variants that exist', () => {
    const [system, user] = riggerMessages(found, environment, existing, 2);
    expect(system?.role).toBe('system');
    expect(user?.content).toContain('- tool_errors | search | search fails on 40% of its calls');
    expect(user?.content).toContain("The environment's tools: search, read.");
    expect(user?.content).toContain('{"size":"large"}');
    expect(user?.content).toContain('"pageSize":1000');
    expect(user?.content).toContain('Propose at most 2 variants, as a JSON array');
  });

  it('reads a JSON array out of prose or a fenced block, and names each proposal', () => {
    const answer = `Sure.\n\`\`\`json\n${JSON.stringify([item({}), item({ name: 'bad name!', rules: undefined, state: { size: 'large' }, weakness: { kind: 'gives_up', subject: 'runs' } })])}\n\`\`\`\nDone [1].`;
    const { proposals, refused } = read(answer);
    expect(refused).toEqual([]);
    expect(proposals.map((p) => [p.variant.name, p.aimedAt.kind, p.why])).toEqual([
      ['flaky-search', 'tool_errors', 'LLM: retrying pays'],
      [expect.stringMatching(/^llm-[0-9a-f]{8}$/), 'gives_up', 'LLM: retrying pays'],
    ]);
  });

  it('refuses, with the reason, what the rule-based rigger could not propose either', () => {
    const answer = JSON.stringify([
      'just text',
      item({ weakness: { kind: 'format', subject: 'answer' } }),
      item({ rules: { transientErrors: { every: 2, tools: ['delete_all'] } } }),
      item({ rules: undefined, state: { size: 'galactic' } }),
      item({ rules: { paging: { pageSize: 1000 } } }),
      item({ rules: undefined }),
      item({ rules: { teleport: true } }),
    ]);
    expect(read(answer).refused.map((r) => r.why)).toEqual([
      expect.stringMatching(/^not a variant: /),
      'aimed at format "answer", which is not a weakness found',
      `"delete_all" is not one of the environment's tools (search, read)`,
      'state {"size":"galactic"} is not one the environment declares (stateParams)',
      'a variant that changes the same things exists already',
      expect.stringMatching(/^not a variant: .*changes something/),
      expect.stringMatching(/^not a variant: rules/),
    ]);
    expect(read('I would make the search tool flakier.')).toEqual({
      proposals: [],
      refused: [{ item: 'I would make the search tool flakier.', why: 'the answer holds no JSON array' }],
    });
  });

  it('proposes no more than asked, and nothing twice', () => {
    const answer = JSON.stringify([
      item({}),
      item({ name: 'again' }),
      item({ rules: { transientErrors: { every: 3 } } }),
    ]);
    const { proposals, refused } = read(answer, 1);
    expect(proposals).toHaveLength(1);
    expect(refused.map((r) => r.why)).toEqual(['beyond the 1 proposals asked for', 'beyond the 1 proposals asked for']);
  });

  it('never throws, and whatever it proposes is a valid, new variant aimed at a weakness found', () => {
    const anyItem = fc.oneof(
      fc.anything(),
      fc.record({
        name: fc.oneof(fc.string(), fc.constant('x')),
        weakness: fc.constantFrom(...found.map((w) => ({ kind: w.kind, subject: w.subject })), {
          kind: 'x',
          subject: 'y',
        }),
        why: fc.string(),
        rules: fc.option(
          fc.record({
            transientErrors: fc.record({
              every: fc.integer({ min: 0, max: 200 }),
              tools: fc.array(fc.constantFrom('search', 'read', 'other')),
            }),
          }),
          { nil: undefined },
        ),
        state: fc.option(fc.constantFrom({ size: 'large' }, { size: 'small' }), { nil: undefined }),
      }),
    );
    fc.assert(
      fc.property(
        fc.array(anyItem, { maxLength: 8 }),
        fc.string(),
        fc.integer({ min: 0, max: 4 }),
        (items, prose, max) => {
          const { proposals, refused } = read(`${prose}${JSON.stringify(items)}`, max);
          expect(proposals.length).toBeLessThanOrEqual(max);
          const ids = proposals.map((p) => variantId('e', p.variant));
          expect(new Set(ids).size).toBe(ids.length);
          expect(ids).not.toContain(variantId('e', existing[0]!));
          for (const p of proposals) {
            expect(variantSchema.safeParse(p.variant).success).toBe(true);
            expect(found).toContain(p.aimedAt);
          }
          for (const r of refused) expect(r.item.length).toBeLessThanOrEqual(201);
        },
      ),
    );
  });
});
