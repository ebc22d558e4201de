import type { Task } from '../rollouts/tasks.js';
import type { Action, ToolSpec } from './contract.js';
import type { LoadedEnvironment } from './load.js';
import { reshapeObservation } from './operators/observations.js';
import { newRuleState, offeredTools, stepWithRules, type RuleState } from './operators/rules.js';
import type { VariantSpec } from './variant-spec.js';
import { seededRandom } from '../random.js';

/** What an attempt did in its environment: the rigger's and the report's evidence. */
export interface SessionSummary {
  environment: string;
  /** The variant's id, null in the original environment. */
  variant: string | null;
  steps: number;
  /** Calls answered with an error (a refusal by a rule, or the tool's own `error: …`). */
  errors: number;
  byTool: Record<string, { calls: number; errors: number }>;
  done: boolean;
}

/**
 * One rollout attempt's episode: the environment's state, and the variant's rules and
 * observations around its step. The state variant is not here: it made the task itself (see
 * variant-tasks.ts), which the verifier scores as it scores the original's.
 */
export class EnvironmentSession {
  private state: unknown = undefined;
  private rules: RuleState = newRuleState();
  private readonly random: () => number;
  private readonly summary: SessionSummary;

  constructor(
    private readonly environment: LoadedEnvironment,
    private readonly task: Task,
    private readonly variant: { id: string; spec: VariantSpec } | null,
    seed: number,
  ) {
    this.random = seededRandom(seed);
    this.summary = {
      environment: environment.id,
      variant: variant?.id ?? null,
      steps: 0,
      errors: 0,
      byTool: {},
      done: false,
    };
  }

  /** The first observation, and the tools this variant offers; starts the episode over. */
  reset(): { observation: string; tools: ToolSpec[] } {
    const first = this.environment.definition.reset(this.task);
    this.state = first.state;
    this.rules = newRuleState();
    return {
      observation: reshapeObservation(this.variant?.spec.observations, first.observation, this.random),
      tools: offeredTools(this.variant?.spec.rules, this.environment.definition.tools),
    };
  }

  /** One tool call, through the variant's rules; an episode not reset yet starts here. */
  step(action: Action): { observation: string; done: boolean } {
    if (this.state === undefined) this.reset();
    const ruled = stepWithRules(this.variant?.spec.rules, this.rules, action, (a) =>
      this.environment.definition.step(this.state, a),
    );
    if (ruled.step) this.state = ruled.step.state;
    const error = ruled.error || /^error\b/i.test(ruled.observation);
    this.count(action.tool, error);
    this.summary.done ||= ruled.done;
    return {
      observation: reshapeObservation(this.variant?.spec.observations, ruled.observation, this.random),
      done: ruled.done,
    };
  }

  ended(): SessionSummary {
    return structuredClone(this.summary);
  }

  private count(tool: string, error: boolean): void {
    const entry = (this.summary.byTool[tool] ??= { calls: 0, errors: 0 });
    entry.calls++;
    this.summary.steps++;
    if (error) {
      entry.errors++;
      this.summary.errors++;
    }
  }
}
