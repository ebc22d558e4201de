import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayRequestError, type IssuedRollout } from '../gateway/control-client.js';
import { ruleSources } from '../gateway/redact.js';
import type { HarnessLaunch, HarnessRun } from './executor.js';
import { classifyFailure, type ClassifiedFailure } from './failure-class.js';
import { recordedRewards, rewardsDisagree, verifiedRewardEvent } from './rewards.js';
import { RolloutsHandedBack, type RolloutBatchSpec, type RolloutOutcome, type RunnerDeps } from './rollout-batch.js';
import { followLog, LOG_NOT_UPLOADED_EVENT, rolloutLogsPrefix, uploadRolloutLog } from './rollout-logs.js';
import { finishScored, outcomeOf, unscoredFields, type OutcomeBase } from './rollout-outcome.js';
import { ATTEMPT_FAILED, isFinished, isUnscored, UNSCORED_FAILURE_CLASSES, type RolloutEvent } from './rollout.js';
import { rolloutIdFor } from './rollout-id.js';
import { harnessView, type Task } from './tasks.js';
import { ENVIRONMENT_EVENT, VARIANT_FIELD } from '../environments/rollout-environment.js';
import { VARIANT_ORIGIN_FIELD } from '../environments/variant-tasks.js';
import { runVerifier } from './verifier.js';

/** What every rollout of a batch shares. */
export interface BatchContext {
  spec: RolloutBatchSpec;
  deps: RunnerDeps;
  pace: () => Promise<void>;
  ready: () => Promise<void>;
  refusalPatterns: RegExp[];
}

/** One rollout in its batch, with its folder, as its attempts need it. */
interface RolloutContext {
  batch: BatchContext;
  task: Task;
  base: OutcomeBase;
  dir: string;
  /** The file an attempt writes its output to. */
  outputOf: (attempt: number) => string;
  launch: (current: IssuedRollout, extraEnv?: Record<string, string>) => HarnessLaunch;
  uploadLog: (file: string, attempt: number) => Promise<void>;
}

/**
 * Runs one rollout of the batch to its end: attempts until one is scored or fails for good, or the
 * batch is cancelled. A rollout an earlier run of the batch left finished and scored is not run again.
 */
export async function runRollout(batch: BatchContext, task: Task, sample: number): Promise<RolloutOutcome> {
  const { spec, deps } = batch;
  const { gateway } = deps;
  const rolloutId = rolloutIdFor(spec.batchId, task.id, sample);
  // A gateway that is down now would fail the whole set at its first write: wait for it first.
  await batch.ready();
  let issued = await gateway.createRollout({
    id: rolloutId,
    taskId: task.id,
    mode: spec.mode,
    ...(spec.policyVersion !== null && { policyVersion: spec.policyVersion }),
    metadata: {
      ...spec.metadata,
      batchId: spec.batchId,
      sample,
      ...(spec.harnessVersion && { harnessVersion: spec.harnessVersion }),
    },
  });
  const base = { rolloutId, taskId: task.id, sample };
  if (isFinished(issued.rollout.status)) {
    if (!isUnscored(issued.rollout)) return outcomeOf(base, issued.rollout, await gateway.listEvents(rolloutId));
    // A batch run again completes what a fault cost it: a replay with unscored rollouts is never reused as is.
    const was = `${issued.rollout.status}${issued.rollout.failureClass ? `, ${issued.rollout.failureClass}` : ''}: ${issued.rollout.statusReason ?? 'no reason'}`;
    issued = await gateway.reopenRollout(rolloutId, `run again: attempt ${issued.attempt} was not scored (${was})`);
  }

  const rollout = rolloutFolder(batch, task, base);
  // Left running by a runner that died: follow its run if the executor still can, else that attempt is lost.
  let resumed: HarnessRun | null = null;
  if (issued.rollout.status === 'running') {
    const takenOver = await takeOverRunning(rollout, issued);
    if ('outcome' in takenOver) return takenOver.outcome;
    ({ issued, resumed } = takenOver);
  }
  return runAttempts(rollout, issued, resumed);
}

/**
 * Writes the task (without its hidden fields) to the rollout's folder, and says how its attempts launch and upload
 * logs.
 */
function rolloutFolder(batch: BatchContext, task: Task, base: OutcomeBase): RolloutContext {
  const { spec, deps } = batch;
  // The rollout's folder is the harness's: only the user the runner runs as may open it.
  const dir = path.join(spec.workDir, base.rolloutId);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = { task: path.join(dir, 'task.json') };
  // Each attempt writes its own output: a lost attempt's file is never scored for the next one.
  const outputOf = (attempt: number) => {
    mkdirSync(path.join(dir, `attempt-${attempt}`), { recursive: true, mode: 0o700 });
    return path.join(dir, `attempt-${attempt}`, 'output.json');
  };
  // Which variant a task runs in, and what it came from, is Rein's to know, not the harness's.
  const visible = harnessView(task, [...spec.hiddenFields, VARIANT_FIELD, VARIANT_ORIGIN_FIELD]);
  writeFileSync(files.task, `${JSON.stringify(visible)}\n`);
  // Hidden fields are never written where a harness runs; earlier Rein versions put the whole task here.
  rmSync(path.join(dir, 'task-with-answer.json'), { force: true });
  const launch = (current: IssuedRollout, extraEnv: Record<string, string> = {}): HarnessLaunch => ({
    issued: current,
    task: visible,
    taskFile: files.task,
    outputFile: outputOf(current.attempt),
    dir,
    env: { ...spec.harnessEnv, ...extraEnv },
    signal: deps.signal,
    ...(deps.logUpload && { redaction: ruleSources(deps.logUpload.redaction) }),
    handedBack: () => deps.cancelIsFinal !== undefined && !deps.cancelIsFinal(),
  });
  return { batch, task, base, dir, outputOf, launch, uploadLog: logUploader(deps, base.rolloutId, dir) };
}

/** How often a running harness's log reaches the artifact store while it grows (the console's live log). */
const LIVE_LOG_MS = 5000;

/** Runs the attempt's harness, its log uploaded while it grows; the finished log is uploaded after. */
async function runFollowed(rollout: RolloutContext, issued: IssuedRollout): Promise<HarnessRun> {
  const { logUpload } = rollout.batch.deps;
  const file = `harness-${issued.attempt}.log`;
  const following =
    logUpload &&
    followLog(
      logUpload,
      `${rolloutLogsPrefix(rollout.base.rolloutId)}${file}`,
      path.join(rollout.dir, file),
      LIVE_LOG_MS,
    );
  try {
    return await runInEnvironment(rollout, issued);
  } finally {
    await following?.stop();
  }
}

/**
 * A log that cannot be uploaded costs the rollout nothing: it stays here, and the rollout's events say so for the
 * console.
 */
function logUploader(
  deps: RunnerDeps,
  rolloutId: string,
  dir: string,
): (file: string, attempt: number) => Promise<void> {
  return async (file, attempt) => {
    if (!deps.logUpload) return;
    const local = path.join(dir, file);
    const result = await uploadRolloutLog(deps.logUpload, rolloutId, local);
    if (result === null || 'uri' in result) return;
    deps.onWarning?.(
      `rollout ${rolloutId}: ${file} was not uploaded to the artifact store (${result.error}); it stays on this worker (${os.hostname()}) at ${local}`,
    );
    await deps.gateway
      .appendEvent(
        rolloutId,
        {
          type: 'custom',
          name: LOG_NOT_UPLOADED_EVENT,
          data: { file, attempt, reason: result.error, host: os.hostname(), path: local },
        },
        attempt,
      )
      .catch((err: unknown) =>
        deps.onWarning?.(
          `rollout ${rolloutId}: could not record that ${file} was not uploaded: ${(err as Error).message}`,
        ),
      );
  };
}

/**
 * Takes over the attempt a runner that died left running: its score if it has one, else its run, else the next attempt.
 */
async function takeOverRunning(
  rollout: RolloutContext,
  issued: IssuedRollout,
): Promise<{ outcome: RolloutOutcome } | { issued: IssuedRollout; resumed: HarnessRun | null }> {
  const { gateway, harness } = rollout.batch.deps;
  const { rolloutId } = rollout.base;
  // Scored, then the runner died before the status write: the score stands, the verifier does not run twice.
  const scored = verifiedRewardEvent(await gateway.listEvents(rolloutId), issued.attempt);
  if (scored) return { outcome: await finishScored(gateway, rollout.base, issued.attempt, scored) };
  const resumed = (await harness.resume?.(rollout.launch(issued))) ?? null;
  if (resumed) return { issued, resumed };
  const reason = `the runner of attempt ${issued.attempt} stopped before it finished (its worker was lost); starting another`;
  await gateway.appendEvent(
    rolloutId,
    { type: 'custom', name: ATTEMPT_FAILED, data: { attempt: issued.attempt, failureClass: 'orchestrator', reason } },
    issued.attempt,
  );
  const next = await nextAttempt(rollout, issued);
  return 'outcome' in next ? next : { issued: next.issued, resumed: null };
}

/**
 * Starts the rollout's next attempt, unless a runner racing this one (one that went quiet, not dead) scored the
 * current attempt meanwhile: the store refuses a new attempt then, and that reward ends the rollout — scored once.
 */
async function nextAttempt(
  rollout: RolloutContext,
  issued: IssuedRollout,
): Promise<{ issued: IssuedRollout } | { outcome: RolloutOutcome }> {
  const { gateway } = rollout.batch.deps;
  const { rolloutId } = rollout.base;
  try {
    return { issued: await gateway.startAttempt(rolloutId) };
  } catch (err) {
    if (!(err instanceof GatewayRequestError && err.code === 'attempt_scored')) throw err;
    const scored = verifiedRewardEvent(await gateway.listEvents(rolloutId), issued.attempt);
    if (!scored) throw err;
    return { outcome: await finishScored(gateway, rollout.base, issued.attempt, scored) };
  }
}

/**
 * Runs attempts (the first one possibly resumed) until one ends the rollout: only infrastructure failures start
 * another.
 */
async function runAttempts(
  rollout: RolloutContext,
  first: IssuedRollout,
  resumedRun: HarnessRun | null,
): Promise<RolloutOutcome> {
  const { spec, deps, pace, ready, refusalPatterns } = rollout.batch;
  const { gateway } = deps;
  const { base } = rollout;
  const { rolloutId } = base;
  let issued = first;
  let resumed = resumedRun;
  for (;;) {
    let run = resumed;
    resumed = null;
    if (!run) {
      await ready();
      await pace();
      if (issued.rollout.status === 'queued')
        await gateway.setStatus(rolloutId, {
          status: 'running',
          reason: `harness started (attempt ${issued.attempt})`,
          attempt: issued.attempt,
        });
      run = await runFollowed(rollout, issued);
    }
    await rollout.uploadLog(`harness-${issued.attempt}.log`, issued.attempt);
    if (run.cancelled) return cancelled(deps, base, issued.attempt);
    const attemptEvents = (await gateway.listEvents(rolloutId)).filter((e) => e.attempt === issued.attempt);
    const failure = classifyFailure(
      run,
      run.exitCode === 0 && !run.timedOut && !run.problem ? [] : await gateway.listCalls(rolloutId, issued.attempt),
      attemptEvents,
      refusalPatterns,
    );
    if (failure?.failureClass === 'infrastructure' && issued.attempt < spec.maxAttempts) {
      await gateway.appendEvent(
        rolloutId,
        { type: 'custom', name: ATTEMPT_FAILED, data: { attempt: issued.attempt, ...failure } },
        issued.attempt,
      );
      const lost = failure.evidence?.upstreamStatus === 404 || failure.evidence?.errorClass === 'policy_unavailable';
      if (lost) await deps.onPolicyLost?.().catch(() => undefined); // if it cannot, the next attempt says why
      const next = await nextAttempt(rollout, issued);
      if ('outcome' in next) return next.outcome;
      issued = next.issued;
      continue;
    }
    // Rein's machinery or the task's environment (the failure-class table's unscored rows): no verifier, no reward.
    if (failure && UNSCORED_FAILURE_CLASSES.includes(failure.failureClass)) {
      await gateway.setStatus(rolloutId, { status: 'failed', ...failure, attempt: issued.attempt });
      return {
        ...unscoredFields(base, issued.attempt),
        status: 'failed',
        reward: null,
        failureClass: failure.failureClass,
        reason: failure.reason,
      };
    }
    // The policy's own failures (a crash, a timeout, a bad reply) are scored like any run: they earn what they
    // achieved.
    return scoreAttempt(rollout, issued.attempt, attemptEvents, failure);
  }
}

/**
 * Runs the harness; with the run's environment, in a session of the task's variant whose URL the
 * harness gets as REIN_ENV_URL, and what the attempt did there recorded as its `environment` event.
 */
async function runInEnvironment(rollout: RolloutContext, issued: IssuedRollout): Promise<HarnessRun> {
  const { deps } = rollout.batch;
  if (!deps.environment) return deps.harness.run(rollout.launch(issued));
  const session = deps.environment.open(rollout.task, rollout.base.rolloutId, issued.attempt);
  let run: HarnessRun;
  try {
    run = await deps.harness.run(rollout.launch(issued, { REIN_ENV_URL: session.url }));
  } finally {
    const summary = session.end();
    await deps.gateway.appendEvent(
      rollout.base.rolloutId,
      { type: 'custom', name: ENVIRONMENT_EVENT, data: { ...summary } },
      issued.attempt,
    );
  }
  return run;
}

/**
 * Runs the verifier on an attempt's output and records its reward, with the policy's failure if the attempt had one.
 */
async function scoreAttempt(
  rollout: RolloutContext,
  attempt: number,
  attemptEvents: RolloutEvent[],
  failure: ClassifiedFailure | null,
): Promise<RolloutOutcome> {
  const { spec, deps } = rollout.batch;
  const { gateway } = deps;
  const { base } = rollout;
  const { rolloutId } = base;
  const verdict = await runVerifier(
    deps,
    spec.rewardWeights,
    rolloutId,
    { task: rollout.task, output: rollout.outputOf(attempt) },
    rollout.dir,
  );
  await rollout.uploadLog('verifier.log', attempt);
  if ('cancelled' in verdict) return cancelled(deps, base, attempt);
  if ('error' in verdict) {
    await gateway.setStatus(rolloutId, {
      status: 'failed',
      reason: verdict.error,
      failureClass: 'verifier',
      evidence: verdict.evidence,
      attempt,
    });
    return {
      ...unscoredFields(base, attempt),
      status: 'failed',
      reward: null,
      failureClass: 'verifier',
      reason: verdict.error,
    };
  }
  const reported = recordedRewards(attemptEvents, attempt).reported ?? null;
  const disagrees = reported !== null && rewardsDisagree(verdict.reward, reported);
  // The failure travels with the score, so a runner that dies before the status write can finish it from the event.
  // The store keeps one verifier's reward per attempt: a runner racing this one (the attempt taken over and resumed)
  // gets the same event back, so both report the reward that stands.
  const event = await gateway.appendEvent(
    rolloutId,
    {
      type: 'reward',
      value: verdict.reward,
      components: verdict.components,
      data: {
        weights: spec.rewardWeights,
        ...(reported !== null && { harnessReported: reported, disagrees }),
        ...(failure && { failure }),
      },
    },
    attempt,
  );
  return finishScored(gateway, base, attempt, event);
}

/**
 * A cancel ends the rollout; a worker going away leaves it running (its attempt is taken over on resume) and stops the
 * batch.
 */
async function cancelled(deps: RunnerDeps, base: OutcomeBase, attempt: number): Promise<RolloutOutcome> {
  if (deps.cancelIsFinal && !deps.cancelIsFinal()) {
    throw new RolloutsHandedBack(
      `the rollouts were interrupted (their worker is going away) at ${base.rolloutId} attempt ${attempt}; they resume where they stopped`,
    );
  }
  await deps.gateway.setStatus(base.rolloutId, {
    status: 'cancelled',
    reason: 'the rollout batch was cancelled',
    attempt,
  });
  return {
    ...base,
    status: 'cancelled',
    reward: null,
    components: {},
    harnessReportedReward: null,
    rewardDisagrees: false,
    failureClass: null,
    reason: 'cancelled',
    attempts: attempt,
  };
}
