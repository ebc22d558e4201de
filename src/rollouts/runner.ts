import { setMaxListeners } from 'node:events';
import { GatewayRequestError, type GatewayControlClient } from '../gateway/control-client.js';
import { refusalRegExps } from './failure-class.js';
import { programProblems } from './program.js';
import { launchSlots, type ReleaseSlot } from './launch-slots.js';
import { launchPacer } from './pacer.js';
import { dependencyWaiter } from './readiness.js';
import { RolloutSetupError, type RolloutBatchSpec, type RolloutOutcome, type RunnerDeps } from './rollout-batch.js';
import { batchRolloutIdProblems, rolloutIdFor, taskSamples } from './rollout-id.js';
import { runRollout, type BatchContext } from './run-rollout.js';
import type { Task } from './tasks.js';

export {
  RolloutSetupError,
  RolloutsHandedBack,
  type RolloutBatchSpec,
  type RolloutOutcome,
  type RunnerDeps,
  type VerifierSpec,
} from './rollout-batch.js';
export { rewardOf } from './verifier.js';
export { rolloutIdFor };

/**
 * Runs a harness on tasks (as local processes or Kubernetes Jobs, through the gateway), scores
 * each run with a verifier that runs apart from the harness, and records the outcome on the
 * rollout.
 */
export async function runRollouts(spec: RolloutBatchSpec, deps: RunnerDeps): Promise<RolloutOutcome[]> {
  const problems = [
    ...batchRolloutIdProblems(
      spec.batchId,
      spec.tasks.map((task) => task.id),
      spec.samplesPerTask,
    ),
    ...refusalPatternProblems(spec.refusalPatterns ?? []),
    // Training must know which version produced its samples; only a pin guarantees that.
    ...(spec.policyVersion === null && spec.mode === 'train'
      ? ['train rollouts must be pinned to a policy version (policyVersion is null)']
      : []),
    ...(await deps.harness.problems()),
    ...programProblems('verifier', deps.verifier),
  ];
  if (problems.length > 0) throw new RolloutSetupError(problems);
  // Every running harness and verifier listens for cancellation on the one signal.
  if (deps.signal) setMaxListeners(2 * spec.concurrency + 10, deps.signal);
  const context: BatchContext = {
    spec,
    deps,
    pace: launchPacer(spec.launchesPerSecond),
    ready: dependencyWaiter(() => dependencyProblems(deps.gateway, spec.policyVersion), {
      maxWaitMs: spec.dependencyWaitMs ?? 0,
      onWaiting: deps.onWaiting,
      signal: deps.signal,
    }),
    refusalPatterns: refusalRegExps(spec.refusalPatterns),
  };
  const slot = launchSlotsOf(spec, deps);
  const jobs = taskSamples(spec.tasks, spec.samplesPerTask);
  const outcomes: RolloutOutcome[] = new Array(jobs.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const index = next++;
      const { task, sample } = jobs[index] as { task: Task; sample: number };
      // The slot is held from before the launch until the rollout is done (its verifier's run included).
      const release = await slot?.();
      let outcome: RolloutOutcome;
      try {
        outcome = await runRollout(context, task, sample);
      } finally {
        await release?.();
      }
      outcomes[index] = outcome;
      deps.onFinished?.(outcome, ++done, jobs.length);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(spec.concurrency, jobs.length)) }, worker));
  return outcomes;
}

/** Where harness.maxRunning is set, the slots its runs take across all workers. */
function launchSlotsOf(spec: RolloutBatchSpec, deps: RunnerDeps): (() => Promise<ReleaseSlot>) | undefined {
  if (spec.maxRunning === undefined) return undefined;
  return launchSlots(deps.gateway, {
    kind: spec.harnessVersion ?? 'unversioned',
    limit: spec.maxRunning,
    onWaiting: deps.onWaiting,
    onWarning: deps.onWarning,
    signal: deps.signal,
  });
}

/** What keeps a launch from reaching the model now: the gateway, or the pinned version's backend, not answering. */
async function dependencyProblems(gateway: GatewayControlClient, policyVersion: string | null): Promise<string[]> {
  try {
    if (policyVersion === null) {
      await gateway.health();
      return [];
    }
    return (await gateway.policyReady(policyVersion)).problems;
  } catch (err) {
    // A version the gateway does not route is not an outage: waiting would not bring it (the attempt says so).
    if (err instanceof GatewayRequestError && err.status === 404) return [];
    return [(err as Error).message];
  }
}

function refusalPatternProblems(patterns: readonly string[]): string[] {
  return patterns.flatMap((p, i) => {
    try {
      new RegExp(p, 'i');
      return [];
    } catch (err) {
      return [`rollouts.refusalPatterns[${i}]: ${(err as Error).message}`];
    }
  });
}
