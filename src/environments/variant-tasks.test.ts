import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../package-root.js';
import { ROLLOUT_ID_MAX_LENGTH, rolloutIdFor, taskIdKey } from '../rollouts/rollout-id.js';
import type { Task } from '../rollouts/tasks.js';
import { loadEnvironment, type LoadedEnvironment } from './load.js';
import { VARIANT_FIELD } from './rollout-environment.js';
import { variantId, variantSchema, type VariantSpec } from './variant-spec.js';
import {
  VARIANT_ORIGIN_FIELD,
  VARIANT_TASK_ID_MAX_LENGTH,
  variantOrigin,
  variantSeed,
  variantTask,
  variantTaskId,
  variantTasks,
} from './variant-tasks.js';

/**
 * Variant tasks from the two example environments, scored by the examples' own verifiers: a
 * state variant is another task the same verifier scores right, a rules-only variant is the same
 * task under its own id.
 */
const examples = path.join(packageRoot(), 'examples');
type Verify = (task: Task, output: { answer: string }) => { components: { success: number } };

let calculator: LoadedEnvironment;
let files: LoadedEnvironment;
let verifyCalculation: Verify;
let verifyFiles: Verify;
let calculate: (expression: string) => number;

beforeAll(async () => {
  const load = async <T>(file: string) => (await import(path.join(examples, file))) as T;
  calculator = await loadEnvironment(path.join(examples, 'calculator-agent', 'environment.mjs'));
  files = await loadEnvironment(path.join(examples, 'files-agent', 'environment.mjs'));
  verifyCalculation = (await load<{ verify: Verify }>('calculator-agent/verifier.mjs')).verify;
  verifyFiles = (await load<{ verify: Verify }>('files-agent/verifier.mjs')).verify;
  calculate = (await load<{ calculate: typeof calculate }>('calculator-agent/harness.mjs')).calculate;
});

const tasksOf = (example: string): Task[] =>
  readFileSync(path.join(examples, example, 'train.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Task);

const identified = (environment: LoadedEnvironment, spec: VariantSpec) => {
  const parsed = variantSchema.parse(spec);
  return { id: variantId(environment.id, parsed), spec: parsed };
};

/** What a correct agent computes from a calculator question: its words as an expression, through the tool. */
function solve(question: string): number {
  const expression = question
    .replace(/ \(Asked on day \d+\.\)/, '')
    .replace(/\?$/, '')
    .replace(/ apples and (\d+) more/, ' + $1')
    .replace(/,? plus /g, ' + ')
    .replace(/ minus /g, ' - ')
    .replace(/ times /g, ' * ');
  return calculate(expression);
}

describe('variantTask', () => {
  it('a calculator state variant asks another question whose answer the same verifier scores', () => {
    const variant = identified(calculator, { name: 'big-three', state: { scale: 10, terms: 3, distractor: true } });
    for (const task of tasksOf('calculator-agent').slice(0, 12)) {
      const varied = variantTask(calculator, task, variant, 7);
      expect(varied.question).not.toBe(task.question);
      expect(varied.question).toMatch(/, plus \d+\? \(Asked on day \d+\.\)$/);
      const answer = solve(String(varied.question));
      expect(answer).toBe(varied.answer);
      expect(verifyCalculation(varied, { answer: `It is ${answer}.` }).components.success).toBe(1);
      expect(verifyCalculation(varied, { answer: String(answer + 1) }).components.success).toBe(0);
      expect(varied).toMatchObject({
        id: `${task.id}:big-three`,
        [VARIANT_FIELD]: 'big-three',
        [VARIANT_ORIGIN_FIELD]: { variant: variant.id, task: task.id },
      });
    }
  });

  it('a files state variant builds another world for the same question, with its answer set', () => {
    const variant = identified(files, { name: 'crowded', state: { services: 8, distractors: 3 } });
    const [task] = tasksOf('files-agent');
    const varied = variantTask(files, task!, variant, 3);
    expect(varied.question).toBe(task!.question);
    expect(varied.files).not.toEqual(task!.files);
    expect(verifyFiles(varied, { answer: String(varied.answer) }).components.success).toBe(1);
    expect(variantOrigin(varied)).toEqual({ variant: variant.id, task: task!.id });
    expect(variantOrigin(task!)).toBeNull();
  });

  it('rules- and observations-only variants keep every field of the task; only id and Rein’s fields are added', () => {
    const variant = identified(files, {
      name: 'flaky',
      rules: { transientErrors: { every: 3 } },
      observations: { format: 'lines' },
    });
    for (const task of tasksOf('files-agent').slice(0, 3)) {
      const {
        id,
        [VARIANT_FIELD]: name,
        [VARIANT_ORIGIN_FIELD]: origin,
        ...fields
      } = variantTask(files, task, variant, 1);
      const { id: _original, ...originalFields } = task;
      expect(fields).toEqual(originalFields);
      expect([id, name, origin]).toEqual([`${task.id}:flaky`, 'flaky', { variant: variant.id, task: task.id }]);
    }
  });

  it('is deterministic for a seed, and another seed asks another question', () => {
    const variant = identified(calculator, { name: 'big', state: { scale: 100 } });
    const task = { id: 't1', question: '2 times 3?', answer: 6 };
    expect(variantTask(calculator, task, variant, 11)).toEqual(variantTask(calculator, task, variant, 11));
    expect(variantTask(calculator, task, variant, 11).question).not.toBe(
      variantTask(calculator, task, variant, 12).question,
    );
  });

  it('refuses a state variant for an environment without vary(), naming the variant and the fix', () => {
    const plain: LoadedEnvironment = { ...calculator, definition: { ...calculator.definition, vary: undefined } };
    expect(() =>
      variantTask(
        plain,
        { id: 't', question: '1 plus 1?', answer: 2 },
        identified(plain, { name: 'big', state: {} }),
        1,
      ),
    ).toThrow(/variant "big": the variant changes "state" but the environment has no vary\(\); add vary/);
  });

  it('names the variant and the task when vary() refuses, and refuses a variant of a variant task', () => {
    const wrong = identified(files, { name: 'wrong', state: { services: 'many' } });
    expect(() => variantTask(files, tasksOf('files-agent')[0]!, wrong, 1)).toThrow(
      /variant "wrong": vary\(\) fails on task train-0: files vary: "services" must be an integer/,
    );
    const variant = identified(calculator, { name: 'big', state: { scale: 10 } });
    const once = variantTask(calculator, { id: 't', question: '1 plus 1?', answer: 2 }, variant, 1);
    expect(() => variantTask(calculator, once, variant, 2)).toThrow(/already runs in variant "big"/);
  });
});

describe('variantTaskId', () => {
  const taskId = fc.string({ minLength: 1, maxLength: 200, unit: 'binary' });
  const variantName = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);

  it('is a task id key short enough that any run’s rollout ids stay within the limit', () => {
    fc.assert(
      fc.property(taskId, variantName, (id, name) => {
        const variant = variantTaskId(id, name);
        expect(taskIdKey(variant)).toBe(variant);
        expect(variant.length).toBeLessThanOrEqual(VARIANT_TASK_ID_MAX_LENGTH);
        const longestBatch = `${'r'.repeat(64)}.it9999`;
        expect(rolloutIdFor(longestBatch, variant, 999).length).toBeLessThanOrEqual(ROLLOUT_ID_MAX_LENGTH);
      }),
    );
  });

  it('gives distinct (task, variant) pairs distinct ids, long or short', () => {
    fc.assert(
      fc.property(taskId, taskId, variantName, variantName, (a, b, m, n) => {
        fc.pre(taskIdKey(a) !== taskIdKey(b) || m !== n);
        expect(variantTaskId(a, m)).not.toBe(variantTaskId(b, n));
      }),
    );
    expect(variantTaskId('train-3', 'big')).toBe('train-3:big');
  });
});

describe('variantTasks', () => {
  const variants = () => [
    identified(calculator, { name: 'big', state: { scale: 10 } }),
    identified(calculator, { name: 'flaky', rules: { transientErrors: { every: 2 } } }),
  ];
  const seedOf = (taskId: string, name: string) => variantSeed(42, taskId, name);

  it('makes each task in each variant, with unique valid ids, the same for the same seeds', () => {
    const tasks = tasksOf('calculator-agent');
    const made = variantTasks(calculator, tasks, variants(), seedOf);
    expect(made).toHaveLength(tasks.length * 2);
    expect(new Set(made.map((t) => t.id)).size).toBe(made.length);
    for (const t of made) expect(taskIdKey(t.id)).toBe(t.id);
    expect(made.slice(0, 2).map((t) => t.id)).toEqual([`${tasks[0]!.id}:big`, `${tasks[0]!.id}:flaky`]);
    expect(variantTasks(calculator, tasks, variants(), seedOf)).toEqual(made);
  });

  it('refuses variant tasks that would share rollout ids with an original task', () => {
    const tasks = [
      { id: 't', question: '1 plus 1?', answer: 2 },
      { id: 't:big', question: '2 plus 2?', answer: 4 },
    ];
    expect(() => variantTasks(calculator, tasks, variants(), seedOf)).toThrow(
      /variant task t:big would share its rollout ids with original task t:big; rename the variant or the task/,
    );
  });
});
