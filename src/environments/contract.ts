import type { Task } from '../rollouts/tasks.js';

/**
 * An environment whose world Rein may shape: the service a harness's tools talk to, behind reset
 * and step. The harness keeps its code and its control flow; its tools send each call to the
 * environment (REIN_ENV_URL, see docs/environments.md) instead of computing or fetching the
 * answer themselves, and the environment answers. Rein varies the environment's initial state,
 * its rules and its observations (variants.ts), never the verifier: every variant rollout is
 * scored by the run's own verifier against the task's contract.
 *
 * An environment is a JavaScript module whose default export has this shape (`environment.module`
 * in the config). Its state is plain JSON, so a session can be journaled and replayed.
 */
export interface EnvironmentDefinition<State = unknown> {
  /** Short and stable; with `version` and the module's bytes it makes the environment's id. */
  name: string;
  /** The version its authors give it (a release tag, a commit). */
  version: string;
  /** The tools it answers, as the harness offers them to its model (OpenAI function tools). */
  tools: ToolSpec[];
  /** The task's first observation and initial state. */
  reset(task: Task): { state: State; observation: string };
  /** One tool call: the observation the tool returns, the state after it, whether the episode is over. */
  step(state: State, action: Action): Step<State>;
  /**
   * Other initial conditions under the same contract (the `state` operator): a task like this one
   * (other operands, sizes, distractor data, longer inputs) with its hidden fields set so the
   * verifier checks it as it checks the original. Deterministic for a `random`.
   */
  vary?(task: Task, params: Record<string, unknown>, random: () => number): Task;
  /**
   * Parameter sets for vary() the rigger may try as `state` variants when it finds tasks failing
   * every sample or runs giving up (rigger-proposals.ts); without them it proposes only rules and
   * observations. Each is checked with fresh rollouts before training uses it.
   */
  stateParams?: Record<string, unknown>[];
}

/** An OpenAI function tool, as harnesses send them. */
export interface ToolSpec {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** One call of one of the environment's tools, with its arguments as the model gave them (parsed JSON). */
export interface Action {
  tool: string;
  arguments: Record<string, unknown>;
}

export interface Step<State = unknown> {
  state: State;
  observation: string;
  done: boolean;
}

/** A module's default export checked against the contract; each problem names the field and the fix. */
export function environmentProblems(value: unknown): string[] {
  if (value === null || typeof value !== 'object') return ['its default export must be an object (the environment)'];
  const env = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const field of ['name', 'version'] as const) {
    if (typeof env[field] !== 'string' || env[field] === '') problems.push(`"${field}" must be a non-empty string`);
  }
  if (typeof env.name === 'string' && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(env.name))
    problems.push('"name" may hold letters, digits and . _ - (at most 64, starting with a letter or digit)');
  for (const field of ['reset', 'step'] as const) {
    if (typeof env[field] !== 'function') problems.push(`"${field}" must be a function`);
  }
  if (env.vary !== undefined && typeof env.vary !== 'function') problems.push('"vary", when given, must be a function');
  if (env.stateParams !== undefined) problems.push(...stateParamsProblems(env.stateParams, env.vary !== undefined));
  if (!Array.isArray(env.tools) || env.tools.length === 0) {
    problems.push('"tools" must list the tools it answers (OpenAI function tools)');
  } else {
    env.tools.forEach((tool: unknown, i) => {
      const name = (tool as ToolSpec | null)?.function?.name;
      if ((tool as ToolSpec | null)?.type !== 'function' || typeof name !== 'string' || name === '')
        problems.push(`tools[${i}] must be {"type": "function", "function": {"name": …}}`);
    });
  }
  return problems;
}

function stateParamsProblems(value: unknown, hasVary: boolean): string[] {
  const isObject = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!Array.isArray(value) || !value.every(isObject))
    return ['"stateParams", when given, must be a list of objects (parameter sets for vary)'];
  return hasVary ? [] : ['"stateParams" are parameters for vary(): give vary too, or remove stateParams'];
}

/** The names of an environment's tools. */
export const toolNames = (env: Pick<EnvironmentDefinition, 'tools'>): string[] => env.tools.map((t) => t.function.name);
