import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { proposeVariants, weaknessesWithoutProposal, type Weakness, type WeaknessKind } from './rigger.js';
import { variantId, variantSchema, type VariantSpec } from './variant-spec.js';

const ENVIRONMENT = 'files@1:0123456789ab';
const TOOLS = ['search', 'read', 'list'];
const STATE_PARAMS = [{ services: 6 }, { depth: 3, longFiles: true }, {}];

const weakness = (kind: WeaknessKind, subject: string, over: Partial<Weakness> = {}): Weakness => ({
  kind,
  subject,
  count: 5,
  share: 0.5,
  detail: `${kind} on ${subject}`,
  severity: 0.2,
  tools: kind === 'tool_errors' ? [subject] : [],
  tasks: [],
  ...over,
});

const anyWeakness = fc
  .tuple(
    fc.constantFrom<WeaknessKind>('tool_errors', 'gives_up', 'long_episodes', 'task_failures', 'format'),
    fc.constantFrom('search', 'read', 'list', 'ghost', 'runs', '3 tasks'),
    fc.double({ min: 0, max: 1, noNaN: true }),
    fc.subarray(TOOLS),
  )
  .map(([kind, subject, share, tools]) => weakness(kind, subject, { share, severity: share / 2, tools }));

/** Variants a config might already declare: some the rigger would propose, under any name. */
const declaredChanges: Array<Omit<VariantSpec, 'name'>> = [
  { rules: { transientErrors: { every: 3, tools: ['search'] } } },
  { rules: { transientErrors: { every: 2, tools: ['read'] } } },
  { rules: { transientErrors: { every: 3 } } },
  { rules: { paging: { pageSize: 1000 } } },
  { rules: { paging: { pageSize: 500 } } },
  { observations: { noise: { lines: 3 } } },
  { observations: { reorder: true } },
  { state: { services: 6 } },
  { state: { longFiles: true, depth: 3 } },
];
const anyExisting = fc
  .uniqueArray(
    fc.tuple(
      fc.constantFrom(...declaredChanges),
      fc.constantFrom('flaky-search-every-3', 'paged-1000', 'noise-3', 'reordered', 'state-fresh', 'mine', 'x1', 'x2'),
    ),
    { selector: ([, name]) => name, maxLength: 8 },
  )
  .map((pairs) => pairs.map(([changes, name]): VariantSpec => ({ name, ...changes })));

const contentOf = (v: VariantSpec) => variantId(ENVIRONMENT, v);

describe('proposals, for any weaknesses and existing variants', () => {
  it('never repeat what an existing variant or another proposal changes, nor an existing name', () => {
    fc.assert(
      fc.property(
        fc.array(anyWeakness, { maxLength: 6 }),
        anyExisting,
        fc.integer({ min: 0, max: 8 }),
        (found, existing, max) => {
          const proposals = proposeVariants(found, { tools: TOOLS, stateParams: STATE_PARAMS }, existing, { max });
          expect(proposals.length).toBeLessThanOrEqual(max);
          const existingContent = new Set(existing.map(contentOf));
          const proposed = proposals.map((p) => contentOf(p.variant));
          for (const id of proposed) expect(existingContent.has(id)).toBe(false);
          expect(new Set(proposed).size).toBe(proposed.length);
          const names = [...existing, ...proposals.map((p) => p.variant)].map((v) => v.name);
          expect(new Set(names).size).toBe(names.length);
        },
      ),
    );
  });

  it('each parse as a variant, are aimed at a given weakness, and say why', () => {
    fc.assert(
      fc.property(fc.array(anyWeakness, { maxLength: 6 }), anyExisting, (found, existing) => {
        for (const p of proposeVariants(found, { tools: TOOLS, stateParams: STATE_PARAMS }, existing)) {
          expect(variantSchema.parse(p.variant)).toEqual(p.variant);
          expect(found).toContain(p.aimedAt);
          expect(p.why.length).toBeGreaterThan(20);
        }
      }),
    );
  });

  it('are the same every time for the same input', () => {
    fc.assert(
      fc.property(fc.array(anyWeakness, { maxLength: 6 }), anyExisting, (found, existing) => {
        const environment = { tools: TOOLS, stateParams: STATE_PARAMS };
        expect(proposeVariants(found, environment, existing)).toEqual(proposeVariants(found, environment, existing));
      }),
    );
  });
});

describe('the rule table', () => {
  it('takes the next candidate when the first one is already declared, under any name', () => {
    const existing: VariantSpec[] = [{ name: 'my-flaky', rules: { transientErrors: { every: 3, tools: ['search'] } } }];
    const [proposal] = proposeVariants([weakness('tool_errors', 'search')], { tools: TOOLS }, existing);
    expect(proposal?.variant).toEqual({
      name: 'flaky-search-every-2',
      rules: { transientErrors: { every: 2, tools: ['search'] } },
    });
  });

  it('spreads the cap over the weaknesses, most severe first, four by default', () => {
    const found = [
      weakness('gives_up', 'runs'),
      weakness('tool_errors', 'read'),
      weakness('long_episodes', 'solved runs'),
    ];
    const proposals = proposeVariants(found, { tools: TOOLS, stateParams: STATE_PARAMS }, []);
    expect(proposals.map((p) => `${p.aimedAt.kind}:${p.variant.name}`)).toEqual([
      'gives_up:paged-1000',
      'tool_errors:flaky-read-every-3',
      'long_episodes:noise-3',
      'gives_up:state-services-6',
    ]);
  });

  it('says why a weakness got no proposal', () => {
    const found = [
      weakness('tool_errors', 'ghost'),
      weakness('task_failures', '2 tasks'),
      weakness('format', 'policy_output'),
    ];
    const proposals = proposeVariants(found, { tools: TOOLS }, []);
    expect(proposals).toEqual([]);
    expect(weaknessesWithoutProposal(found, { tools: TOOLS }, proposals).map((g) => g.why)).toEqual([
      expect.stringContaining('"ghost" is not one of the environment\'s tools'),
      expect.stringContaining('no state parameters'),
      expect.stringContaining("the output's format is the model's"),
    ]);
  });

  it('makes a proposal whose name is taken unique by what it changes', () => {
    const existing: VariantSpec[] = [{ name: 'paged-1000', rules: { paging: { pageSize: 500 } } }];
    const [proposal] = proposeVariants([weakness('gives_up', 'runs')], { tools: TOOLS }, existing);
    expect(proposal?.variant.name).toMatch(/^paged-1000-[0-9a-f]{8}$/);
    expect(proposal?.variant.rules).toEqual({ paging: { pageSize: 1000 } });
  });
});
