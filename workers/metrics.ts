import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import { CancelledFailure } from '@temporalio/common';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import type { UpdatePolicySummary } from '../activities/update-policy.js';
import type { WorkerMetrics } from '../src/metrics/worker-metrics.js';
import type { PolicyRegistry } from '../src/registry/policy-registry.js';

/**
 * Times every activity the worker runs and reads the results worth counting: a rollout set's
 * outcomes, and the trainer's metrics of a policy update (as the registry recorded them, which is
 * all the trainer reported, not only what the summary carries).
 */
export function metricsInterceptor(
  metrics: WorkerMetrics,
  registry: PolicyRegistry | undefined,
): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const activity = ctx.info.activityType;
        metrics.activityStarted(activity);
        const t0 = performance.now();
        let outcome: 'ok' | 'error' | 'cancelled' = 'error';
        try {
          const result = await next(input);
          outcome = 'ok';
          await observe(activity, input.args, result);
          return result;
        } catch (err) {
          if (err instanceof CancelledFailure) outcome = 'cancelled';
          throw err;
        } finally {
          metrics.activityEnded(activity, outcome, (performance.now() - t0) / 1000);
        }
      },
    },
  });

  async function observe(activity: string, args: unknown[], result: unknown): Promise<void> {
    if (activity === 'runRollouts') {
      metrics.rolloutSetDone((args[0] as RunRolloutsInput).mode, result as RunRolloutsSummary);
    } else if (activity === 'updatePolicy') {
      const { version } = result as UpdatePolicySummary;
      metrics.policyUpdated(
        (await registry?.get(version))?.trainerMetrics ?? (result as unknown as Record<string, unknown>),
      );
    }
  }
}
