import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { serverRegistry, STAGE_SECONDS_BUCKETS } from './registry.js';

/** What a finished rollout set reports (RunRolloutsSummary's counts). */
export interface RolloutSetCounts {
  byStatus: Record<string, number>;
  byFailureClass: Record<string, number>;
}

/** The trainer's numbers as it reports them for one policy update (the registry's trainerMetrics). */
const TRAINER_GAUGES = {
  loss: ['rein_trainer_loss', 'PPO-clip loss of the last policy update, as the trainer reports it'],
  approxKl: [
    'rein_trainer_approx_kl',
    'Approximate KL divergence of the last policy update from the policy that sampled',
  ],
  clipFraction: [
    'rein_trainer_clip_fraction',
    'Share of trained tokens whose ratio was clipped in the last policy update',
  ],
  entropy: ['rein_trainer_entropy', 'Mean entropy of the policy over trained tokens in the last policy update'],
  gradNorm: ['rein_trainer_grad_norm', 'Gradient norm (before clipping) of the last policy update'],
} as const;

/**
 * A worker's Prometheus metrics: how long each activity (stage) took and how it ended, which are
 * running, the rollouts of each finished set by status and failure class, and the trainer's
 * metrics of the last policy update.
 */
export class WorkerMetrics {
  readonly registry: Registry = serverRegistry();
  private readonly activitySeconds = new Histogram({
    name: 'rein_worker_activity_duration_seconds',
    help: 'Time one activity attempt (a stage: runRollouts, buildBatch, updatePolicy, gateCandidate, ...) took, by how it ended (ok, error, cancelled)',
    labelNames: ['activity', 'outcome'] as const,
    buckets: STAGE_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  private readonly activitiesRunning = new Gauge({
    name: 'rein_worker_activities_running',
    help: 'Activity attempts running on this worker now',
    labelNames: ['activity'] as const,
    registers: [this.registry],
  });
  private readonly rollouts = new Counter({
    name: 'rein_worker_rollouts_total',
    help: 'Rollouts of finished rollout sets, by mode (train, eval, shadow) and status; counted when the set completes',
    labelNames: ['mode', 'status'] as const,
    registers: [this.registry],
  });
  private readonly rolloutFailures = new Counter({
    name: 'rein_worker_rollout_failures_total',
    help: 'Failed rollouts of finished rollout sets, by mode and failure class (harness, model, infrastructure, ...)',
    labelNames: ['mode', 'failure_class'] as const,
    registers: [this.registry],
  });
  private readonly updates = new Counter({
    name: 'rein_trainer_updates_total',
    help: 'Policy updates finished on this worker',
    registers: [this.registry],
  });
  private readonly steps = new Counter({
    name: 'rein_trainer_steps_total',
    help: 'Optimizer steps of the policy updates finished on this worker',
    registers: [this.registry],
  });
  private readonly trainer = Object.fromEntries(
    Object.entries(TRAINER_GAUGES).map(([key, [name, help]]) => [
      key,
      new Gauge({ name, help, registers: [this.registry] }),
    ]),
  ) as Record<keyof typeof TRAINER_GAUGES, Gauge>;

  private readonly servingVersions = new Gauge({
    name: 'rein_serving_versions',
    help: 'Trained versions the aliases point at (state needed), and those the last reconciler pass could not serve (failed)',
    labelNames: ['state'],
    registers: [this.registry],
  });
  private readonly servingLoads = new Counter({
    name: 'rein_serving_loads_total',
    help: 'Versions the serving reconciler loaded again on an endpoint that had forgotten them (a backend restart)',
    registers: [this.registry],
  });

  /** One pass of the serving reconciler (registry/serving-reconciler.ts). */
  servingReconciled(state: { needed: string[]; failed: unknown[]; loaded: Array<{ endpoints: string[] }> }): void {
    this.servingVersions.labels('needed').set(state.needed.length);
    this.servingVersions.labels('failed').set(state.failed.length);
    for (const l of state.loaded) this.servingLoads.inc(l.endpoints.length);
  }

  activityStarted(activity: string): void {
    this.activitiesRunning.labels(activity).inc();
  }

  activityEnded(activity: string, outcome: 'ok' | 'error' | 'cancelled', seconds: number): void {
    this.activitiesRunning.labels(activity).dec();
    this.activitySeconds.labels(activity, outcome).observe(seconds);
  }

  rolloutSetDone(mode: string, counts: RolloutSetCounts): void {
    for (const [status, n] of Object.entries(counts.byStatus)) this.rollouts.labels(mode, status).inc(n);
    for (const [failureClass, n] of Object.entries(counts.byFailureClass))
      this.rolloutFailures.labels(mode, failureClass).inc(n);
  }

  /** A policy update's metrics as the trainer wrote them; a number it did not report leaves its gauge as it was. */
  policyUpdated(trainerMetrics: Record<string, unknown>): void {
    this.updates.inc();
    const number = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
    const steps = number(trainerMetrics.steps);
    if (steps !== undefined && steps > 0) this.steps.inc(steps);
    for (const key of Object.keys(TRAINER_GAUGES) as Array<keyof typeof TRAINER_GAUGES>) {
      const value = number(trainerMetrics[key]);
      if (value !== undefined) this.trainer[key].set(value);
    }
  }
}
