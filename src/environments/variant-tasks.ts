import { createHash } from 'node:crypto';
import { seededRandom } from '../random.js';
import { taskIdKey } from '../rollouts/rollout-id.js';
import type { Task } from '../rollouts/tasks.js';
import type { LoadedEnvironment } from './load.js';
import { VARIANT_FIELD } from './rollout-environment.js';
import type { IdentifiedVariant, VariantSpec } from './variant-spec.js';

/**
 * The task field recording where a variant task came from: `{variant, task}`, the variant's id
 * and the original task's id, so the ledger, the report and the rigger tie a variant rollout back
 * to the task it varies. Hidden from the harness like VARIANT_FIELD (it is Rein's bookkeeping,
 * not part of the task); the verifier may see it and has no use for it.
 */
export const VARIANT_ORIGIN_FIELD = 'reinVariantOf';

export interface VariantOrigin {
  /** The variant's id (variantId): what it changes, in which environment. */
  variant: string;
  /** The id of the original task the variant task was made from. */
  task: string;
}

/**
 * The longest a variant task's id may be. A rollout id is `<run id>.it<iteration>.<task id>.<sample>`
 * (at most 128 characters, see rollout-id.ts) and a run id may take 64 of them: 48 leaves room for
 * up to 9999 iterations and 1000 samples, so a variant task never makes a rollout id too long.
 */
export const VARIANT_TASK_ID_MAX_LENGTH = 48;

/**
 * The variant task's id: `<task id>:<variant name>`, or, when that is too long, a shortened
 * form whose hash covers the whole original (so two long ids never meet). Variant names hold
 * no ':', so the part after the last ':' is always the variant's (and two pairs never share an id).
 */
export function variantTaskId(taskId: string, variantName: string): string {
  const full = `${taskIdKey(taskId)}:${variantName}`;
  if (full.length <= VARIANT_TASK_ID_MAX_LENGTH) return full;
  const hash = createHash('sha256').update(`${taskId}\n${variantName}`).digest('hex').slice(0, 10);
  // 16 + 1 + 10 + 1 + 20 = 48: the start of each name stays readable.
  return `${taskIdKey(taskId).slice(0, 16)}.${hash}:${variantName.slice(0, 20)}`;
}

/** Where a variant task came from; null for an original task. */
export function variantOrigin(task: Task): VariantOrigin | null {
  const origin = task[VARIANT_ORIGIN_FIELD] as Partial<VariantOrigin> | undefined;
  return typeof origin?.variant === 'string' && typeof origin.task === 'string'
    ? { variant: origin.variant, task: origin.task }
    : null;
}

/**
 * The task a training rollout runs in a variant. A `state` variant asks the environment's own
 * vary() for other initial conditions (it sets the hidden fields, the answer among them, so the
 * run's verifier scores the new task exactly as it scores the original); a rules- or
 * observations-only variant changes how the tools behave, not the task, so the task stays as it
 * is. Either way the task gets its own id and names its variant (VARIANT_FIELD) and its origin
 * (VARIANT_ORIGIN_FIELD); no other field is touched. Deterministic for a seed.
 */
export function variantTask(
  environment: LoadedEnvironment,
  task: Task,
  variant: IdentifiedVariant,
  seed: number,
): Task {
  const name = variant.spec.name;
  if (task[VARIANT_FIELD] !== undefined || task[VARIANT_ORIGIN_FIELD] !== undefined)
    throw new Error(
      `task ${task.id} already runs in variant "${String(task[VARIANT_FIELD])}": make variant "${name}" from the original task`,
    );
  const base = variant.spec.state === undefined ? task : variedTask(environment, task, variant.spec, seed);
  const origin: VariantOrigin = { variant: variant.id, task: task.id };
  return { ...base, id: variantTaskId(task.id, name), [VARIANT_FIELD]: name, [VARIANT_ORIGIN_FIELD]: origin };
}

/** The environment's vary() for a state variant, its failures named with the variant and the fix. */
function variedTask(environment: LoadedEnvironment, task: Task, spec: VariantSpec, seed: number): Task {
  const where = `environment ${environment.id}, variant "${spec.name}"`;
  const vary = environment.definition.vary;
  if (!vary)
    throw new Error(
      `${where}: the variant changes "state" but the environment has no vary(); ` +
        'add vary(task, params, random) to the environment module or give the variant only rules or observations',
    );
  let varied: unknown;
  try {
    varied = vary(structuredClone(task), structuredClone(spec.state ?? {}), seededRandom(seed));
  } catch (err) {
    throw new Error(`${where}: vary() fails on task ${task.id}: ${(err as Error).message}`, { cause: err });
  }
  if (varied === null || typeof varied !== 'object' || Array.isArray(varied))
    throw new Error(`${where}: vary() must return the varied task (an object), not ${JSON.stringify(varied)}`);
  return varied as Task;
}

/**
 * Each task in each variant, task by task, each with its own seed: the same tasks, variants and
 * seeds give the same tasks. Refuses a set whose variant task ids would meet each other or an
 * original task's (rollout ids would be shared).
 */
export function variantTasks(
  environment: LoadedEnvironment,
  tasks: readonly Task[],
  variants: readonly IdentifiedVariant[],
  seedOf: (taskId: string, variantName: string) => number,
): Task[] {
  const made = tasks.flatMap((task) =>
    variants.map((variant) => variantTask(environment, task, variant, seedOf(task.id, variant.spec.name))),
  );
  const seen = new Map<string, string>(tasks.map((t) => [taskIdKey(t.id), `original task ${t.id}`]));
  for (const task of made) {
    const key = taskIdKey(task.id);
    const other = seen.get(key);
    if (other)
      throw new Error(
        `variant task ${task.id} would share its rollout ids with ${other}; rename the variant or the task`,
      );
    seen.set(key, `variant task ${task.id}`);
  }
  return made;
}

/** A seed for one task in one variant from a run's seed: reproducible, and different for each pair. */
export function variantSeed(seed: number, taskId: string, variantName: string): number {
  return createHash('sha256').update(`${seed}\n${taskId}\n${variantName}`).digest().readUInt32BE(0);
}
