import { createHash } from 'node:crypto';
import type { Task } from '../rollouts/tasks.js';
import { toolNames } from './contract.js';
import { loadEnvironment, EnvironmentLoadError, type LoadedEnvironment } from './load.js';
import { rulesProblems } from './operators/rules.js';
import type { OpenedSession, EnvironmentServer } from './server.js';
import { EnvironmentSession } from './session.js';
import type { EnvironmentSettings } from './settings.js';
import { identifiedVariants, type IdentifiedVariant, type VariantSpec } from './variant-spec.js';

/**
 * The task field naming the variant a training task runs in (the curriculum sets it); hidden
 * from the harness like the answer, absent for a task of the original environment.
 */
export const VARIANT_FIELD = 'reinVariant';

/** The event each attempt run in an environment records: its SessionSummary (steps, errors by tool, variant). */
export const ENVIRONMENT_EVENT = 'environment';

/** The run's environment as the rollout runner uses it: one session per attempt. */
export interface RolloutEnvironment {
  /** The environment's id (name@version:module hash). */
  id: string;
  /** The loaded module and the declared variants, as resolveTaskIds makes variant tasks with them. */
  environment: LoadedEnvironment;
  variants: IdentifiedVariant[];
  /** Opens the attempt's session (its URL for the harness as REIN_ENV_URL) in the task's variant. */
  open(task: Task, rolloutId: string, attempt: number): OpenedSession;
}

/**
 * Loads the run's environment and checks its variants against it (the declared ones, then
 * `proposed`: the rigger's, which the set's input carries); EnvironmentLoadError names each problem.
 */
export async function rolloutEnvironment(
  settings: EnvironmentSettings,
  server: EnvironmentServer,
  proposed: readonly VariantSpec[] = [],
): Promise<RolloutEnvironment> {
  const loaded = await loadEnvironment(settings.module);
  const tools = toolNames(loaded.definition);
  const label = (i: number, v: VariantSpec) =>
    i < settings.variants.length ? `environment.variants[${i}] (${v.name})` : `the rigger's variant ${v.name}`;
  const specs = [...settings.variants, ...proposed];
  const problems = specs.flatMap((v, i) => [
    ...rulesProblems(v.rules, tools).map((p) => `${label(i, v)}: ${p}`),
    ...(v.state && !loaded.definition.vary
      ? [`${label(i, v)}: the environment has no vary(), so it cannot take "state"`]
      : []),
  ]);
  if (problems.length > 0) throw new EnvironmentLoadError(problems.join('; '));
  const variants = identifiedVariants(loaded.id, specs);
  const byName = new Map(variants.map((v) => [v.spec.name, v]));
  return {
    id: loaded.id,
    environment: loaded,
    variants,
    open(task, rolloutId, attempt) {
      const name = task[VARIANT_FIELD];
      const variant = name === undefined ? null : byName.get(String(name));
      if (variant === undefined)
        throw new EnvironmentLoadError(
          `task ${task.id} runs in variant "${String(name)}", which neither environment.variants nor the rigger's proposals hold`,
        );
      return server.open(new EnvironmentSession(loaded, task, variant, seedOf(rolloutId, attempt)));
    },
  };
}

/** Each attempt's own seed for the variant's randomness (noise, reordering): reproducible, different per attempt. */
function seedOf(rolloutId: string, attempt: number): number {
  return createHash('sha256').update(`${rolloutId}\n${attempt}`).digest().readUInt32BE(0);
}
