import type { Task } from '../rollouts/tasks.js';
import type { LoadedEnvironment } from './load.js';
import type { IdentifiedVariant } from './variant-spec.js';
import { variantSeed, variantTask, variantTaskId } from './variant-tasks.js';

/**
 * The seed a run's variant tasks are made with. Fixed, so a variant task is the same on every
 * worker and every retry; variantSeed mixes in the task and the variant, so each pair differs.
 */
const VARIANT_TASK_SEED = 0;

/**
 * The tasks a selection names, in its order: the set's own, and variant tasks (`<task>:<variant>`,
 * see variantTaskId) made on the spot from the task they vary, so no derived task set has to be
 * written and shared. `unknown`: ids that are neither.
 */
export function resolveTaskIds(
  tasks: readonly Task[],
  ids: readonly string[],
  variants?: { environment: LoadedEnvironment; variants: readonly IdentifiedVariant[] },
): { tasks: Task[]; unknown: string[] } {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  let pairs: Map<string, { task: Task; variant: IdentifiedVariant }> | null = null;
  const resolved: Task[] = [];
  const unknown: string[] = [];
  for (const id of ids) {
    const original = byId.get(id);
    if (original) {
      resolved.push(original);
      continue;
    }
    pairs ??= variantPairs(tasks, variants?.variants ?? []);
    const pair = pairs.get(id);
    if (!pair || !variants) unknown.push(id);
    else
      resolved.push(
        variantTask(
          variants.environment,
          pair.task,
          pair.variant,
          variantSeed(VARIANT_TASK_SEED, pair.task.id, pair.variant.spec.name),
        ),
      );
  }
  return { tasks: resolved, unknown };
}

function variantPairs(tasks: readonly Task[], variants: readonly IdentifiedVariant[]) {
  const pairs = new Map<string, { task: Task; variant: IdentifiedVariant }>();
  for (const task of tasks)
    for (const variant of variants) pairs.set(variantTaskId(task.id, variant.spec.name), { task, variant });
  return pairs;
}

/**
 * An iteration's training tasks with `share` of them run in kept variants instead, at the same
 * budget: which tasks and which variant each gets turn with the iteration, so over a run every
 * kept variant meets many tasks. Held-out selections never come here.
 */
export function curriculumTaskIds(
  taskIds: readonly string[],
  kept: readonly string[],
  share: number,
  iteration: number,
): string[] {
  const n = taskIds.length;
  const k = kept.length === 0 ? 0 : Math.min(n, Math.round(share * n));
  const ids = [...taskIds];
  for (let j = 0; j < k; j++) {
    const at = (iteration * k + j) % n;
    ids[at] = variantTaskId(taskIds[at] as string, kept[(iteration + j) % kept.length] as string);
  }
  return ids;
}

/** The tasks each candidate variant is checked on: the first `tasksPerVariant` training tasks, in that variant. */
export function validationTaskIds(
  taskIds: readonly string[],
  candidates: readonly string[],
  tasksPerVariant: number,
): Array<{ variant: string; taskIds: string[] }> {
  const sample = taskIds.slice(0, tasksPerVariant);
  return candidates.map((variant) => ({ variant, taskIds: sample.map((id) => variantTaskId(id, variant)) }));
}
