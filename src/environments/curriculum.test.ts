import path from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { curriculumTaskIds, resolveTaskIds, validationTaskIds } from './curriculum.js';
import { loadEnvironment, type LoadedEnvironment } from './load.js';
import { VARIANT_FIELD } from './rollout-environment.js';
import { environmentSchema } from './settings.js';
import { identifiedVariants } from './variant-spec.js';
import { variantOrigin, variantTaskId } from './variant-tasks.js';

const CALCULATOR = path.join(import.meta.dirname, '..', '..', 'examples', 'calculator-agent', 'environment.mjs');
let calculator: LoadedEnvironment;
beforeAll(async () => {
  calculator = await loadEnvironment(CALCULATOR);
});

const ids = fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,11}$/), { minLength: 1, maxLength: 40 });
const names = fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,7}$/), { minLength: 1, maxLength: 5 });

describe('the curriculum', () => {
  it('runs a share of the training tasks in kept variants, at the same budget, never without a kept one', () => {
    fc.assert(
      fc.property(ids, names, fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(50), (taskIds, kept, share, it) => {
        const mixed = curriculumTaskIds(taskIds, kept, share, it);
        expect(mixed).toHaveLength(taskIds.length);
        const varied = mixed.filter((id, i) => id !== taskIds[i]);
        expect(varied).toHaveLength(Math.min(taskIds.length, Math.round(share * taskIds.length)));
        // Each varied task is its own task in one of the kept variants, in its place.
        mixed.forEach((id, i) => {
          if (id !== taskIds[i]) expect(kept.map((k) => variantTaskId(taskIds[i] as string, k))).toContain(id);
        });
        expect(curriculumTaskIds(taskIds, kept, share, it)).toEqual(mixed);
        expect(curriculumTaskIds(taskIds, [], share, it)).toEqual(taskIds);
      }),
    );
  });

  it('turns which tasks are varied with the iteration', () => {
    const taskIds = Array.from({ length: 8 }, (_, i) => `t${i}`);
    const varied = (it: number) => curriculumTaskIds(taskIds, ['big'], 0.25, it).filter((id) => id.includes(':'));
    expect(varied(1)).not.toEqual(varied(2));
    expect(new Set([1, 2, 3, 4].flatMap(varied)).size).toBe(8);
  });

  it('checks each candidate on the first tasks of the iteration', () => {
    expect(validationTaskIds(['a', 'b', 'c'], ['big', 'flaky'], 2)).toEqual([
      { variant: 'big', taskIds: ['a:big', 'b:big'] },
      { variant: 'flaky', taskIds: ['a:flaky', 'b:flaky'] },
    ]);
  });

  it('makes a variant task from its id on any worker, the same each time, and names ids it cannot make', () => {
    const settings = environmentSchema.parse({
      module: CALCULATOR,
      variants: [
        { name: 'big', state: { scale: 10 } },
        { name: 'worded', observations: { template: '= {observation}' } },
      ],
    });
    const tasks = [
      { id: 't1', question: '2 plus 3?', answer: 5 },
      { id: 't2', question: '4 times 6?', answer: 24 },
    ];
    const variants = { environment: calculator, variants: identifiedVariants(calculator.id, settings.variants) };
    const wanted = ['t1', 't1:big', 't2:worded', 'nope', 't3:big'];
    const { tasks: made, unknown } = resolveTaskIds(tasks, wanted, variants);
    expect(unknown).toEqual(['nope', 't3:big']);
    expect(made.map((t) => [t.id, t[VARIANT_FIELD] ?? null, variantOrigin(t)?.task ?? null])).toEqual([
      ['t1', null, null],
      ['t1:big', 'big', 't1'],
      ['t2:worded', 'worded', 't2'],
    ]);
    // The state variant asked another question of the same kind, with its own answer.
    expect(made[1]?.question).toMatch(/^\d+ plus \d+\?$/);
    expect(made[1]?.question).not.toBe('2 plus 3?');
    expect(made[2]).toMatchObject({ question: '4 times 6?', answer: 24 });
    expect(resolveTaskIds(tasks, wanted, variants).tasks).toEqual(made);
    expect(resolveTaskIds(tasks, ['t1:big']).unknown).toEqual(['t1:big']);
  });
});
