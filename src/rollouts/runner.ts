import { setMaxListeners } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GatewayRequestError, type GatewayControlClient, type IssuedRollout } from '../gateway/control-client.js';
import type { HarnessExecutor, HarnessLaunch, HarnessRun } from './executor.js';
import { classifyFailure, DEFAULT_REFUSAL_PATTERNS } from './failure-class.js';
import { allowedEnv, withPlaceholders } from './local-executor.js';
import { runCommand } from './process.js';
import { programProblems, type ProgramSpec } from './program.js';
import { launchPacer } from './pacer.js';
import { dependencyWaiter } from './readiness.js';
import { recordedRewards, rewardsDisagree } from './rewards.js';
import { LOG_NOT_UPLOADED_EVENT, uploadRolloutLog, type LogUploadSettings } from './rollout-logs.js';
import { isFinished, isUnscored, type FailureClass, type Rollout, type RolloutEvent, type RolloutMode } from './rollout.js';
import { batchRolloutIdProblems, rolloutIdFor } from './rollout-id.js';
import { harnessView, type Task } from './tasks.js';

/**
 * Runs a harness on tasks (as local processes or Kubernetes Jobs, through the gateway), scores
 * each run with a verifier that runs apart from the harness, and records the outcome on the
 * rollout.
 */
export type VerifierSpec = ProgramSpec;

export interface RolloutBatchSpec {
  /** Rollout ids are `<batchId>.<task id>.<sample>`: running the same batch again resumes it. */
  batchId: string;
  tasks: Task[];
  samplesPerTask: number;
  mode: RolloutMode;
  /**
   * The version every rollout is pinned to; null leaves them unpinned, as production traffic is:
   * the model the harness names resolves through its alias (and a mirror on it applies).
   */
  policyVersion: string | null;
  /** Task fields the harness must not see (the expected answer). */
  hiddenFields: string[];
  /** reward = Σ weight × component; the verifier's components are all stored. */
  rewardWeights: Record<string, number>;
  /** The most harness runs going at once. */
  concurrency: number;
  /** The most harness runs started per second (an API server or a scheduler may need it). */
  launchesPerSecond?: number | undefined;
  /** Attempts per rollout; only infrastructure failures start another. */
  maxAttempts: number;
  /** The most this batch waits, in all, for the gateway and backend to answer before launches (default 0: no wait). */
  dependencyWaitMs?: number;
  workDir: string;
  /** Recorded on every rollout: the harness ledger's key. */
  harnessVersion?: string;
  /** Extra harness variables for this batch (e.g. greedy decoding for held-out replay). */
  harnessEnv?: Record<string, string>;
  /** Regular expressions (case-insensitive) that mark a model reply as a refusal. */
  refusalPatterns?: string[];
  metadata?: Record<string, unknown>;
}

/** The harness or verifier cannot start here: nothing was launched, and retrying will not help. */
export class RolloutSetupError extends Error {
  constructor(readonly problems: string[]) {
    super(`cannot run rollouts: ${problems.join('; ')}`);
    this.name = 'RolloutSetupError';
  }
}

export interface RolloutOutcome {
  rolloutId: string;
  taskId: string;
  sample: number;
  status: 'succeeded' | 'failed' | 'cancelled';
  reward: number | null;
  components: Record<string, number>;
  /** What the harness said its reward was, if it reported one; never trained on. */
  harnessReportedReward: number | null;
  rewardDisagrees: boolean;
  failureClass: FailureClass | null;
  reason: string | null;
  attempts: number;
}

export interface RunnerDeps {
  gateway: GatewayControlClient;
  harness: HarnessExecutor;
  verifier: VerifierSpec;
  onFinished?: (outcome: RolloutOutcome, done: number, total: number) => void;
  /** What the batch is waiting for before it launches more (null: not waiting). */
  onWaiting?: (problem: string | null) => void;
  /**
   * Called before the next attempt when an attempt's model call got a 404 or the gateway could not
   * route the pinned version: the backend or gateway forgot it (a restart). It should serve it again.
   */
  onPolicyLost?: () => Promise<void>;
  signal?: AbortSignal;
  /**
   * Asked when `signal` aborts: true (the default) when it is a user's cancel, which ends the
   * rollouts it interrupts as cancelled; false when the worker is going away, which hands them
   * back instead (RolloutsHandedBack) for another runner to resume.
   */
  cancelIsFinal?: () => boolean;
  /**
   * Where the harness's and the verifier's logs go when each ends (redacted, their last MiBs), for
   * the API and the console on any host; unset, they stay only in the rollout's folder.
   */
  logUpload?: LogUploadSettings;
  /** Told of what goes wrong without failing a rollout (a log that could not be uploaded). */
  onWarning?: (message: string) => void;
}

/** The runner stopped because its worker is going away; the rollouts it left stay resumable. */
export class RolloutsHandedBack extends Error {
  override name = 'RolloutsHandedBack';
}

export async function runRollouts(spec: RolloutBatchSpec, deps: RunnerDeps): Promise<RolloutOutcome[]> {
  const problems = [
    ...batchRolloutIdProblems(spec.batchId, spec.tasks.map((task) => task.id), spec.samplesPerTask),
    ...refusalPatternProblems(spec.refusalPatterns ?? []),
    // Training must know which version produced its samples; only a pin guarantees that.
    ...(spec.policyVersion === null && spec.mode === 'train' ? ['train rollouts must be pinned to a policy version (policyVersion is null)'] : []),
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
    refusalPatterns: (spec.refusalPatterns ?? DEFAULT_REFUSAL_PATTERNS).map((p) => new RegExp(p, 'i')),
  };
  const jobs = spec.tasks.flatMap((task) => Array.from({ length: spec.samplesPerTask }, (_, sample) => ({ task, sample })));
  const outcomes: RolloutOutcome[] = new Array(jobs.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const index = next++;
      const { task, sample } = jobs[index] as { task: Task; sample: number };
      const outcome = await runOne(context, task, sample);
      outcomes[index] = outcome;
      deps.onFinished?.(outcome, ++done, jobs.length);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(spec.concurrency, jobs.length)) }, worker));
  return outcomes;
}

interface BatchContext {
  spec: RolloutBatchSpec;
  deps: RunnerDeps;
  pace: () => Promise<void>;
  ready: () => Promise<void>;
  refusalPatterns: RegExp[];
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

export { rolloutIdFor };

async function runOne({ spec, deps, pace, ready, refusalPatterns }: BatchContext, task: Task, sample: number): Promise<RolloutOutcome> {
  const { gateway } = deps;
  const rolloutId = rolloutIdFor(spec.batchId, task.id, sample);
  // A gateway that is down now would fail the whole set at its first write: wait for it first.
  await ready();
  let issued = await gateway.createRollout({
    id: rolloutId,
    taskId: task.id,
    mode: spec.mode,
    ...(spec.policyVersion !== null && { policyVersion: spec.policyVersion }),
    metadata: { ...spec.metadata, batchId: spec.batchId, sample, ...(spec.harnessVersion && { harnessVersion: spec.harnessVersion }) },
  });
  const base = { rolloutId, taskId: task.id, sample };
  if (isFinished(issued.rollout.status)) {
    if (!isUnscored(issued.rollout)) return outcomeOf(base, issued.rollout, await gateway.listEvents(rolloutId));
    // A batch run again completes what a fault cost it: a replay with unscored rollouts is never reused as is.
    const was = `${issued.rollout.status}${issued.rollout.failureClass ? `, ${issued.rollout.failureClass}` : ''}: ${issued.rollout.statusReason ?? 'no reason'}`;
    issued = await gateway.reopenRollout(rolloutId, `run again: attempt ${issued.attempt} was not scored (${was})`);
  }

  // The rollout's folder is the harness's: only the user the runner runs as may open it.
  const dir = path.join(spec.workDir, rolloutId);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const files = { task: path.join(dir, 'task.json') };
  // Each attempt writes its own output: a lost attempt's file is never scored for the next one.
  const outputOf = (attempt: number) => {
    mkdirSync(path.join(dir, `attempt-${attempt}`), { recursive: true, mode: 0o700 });
    return path.join(dir, `attempt-${attempt}`, 'output.json');
  };
  const visible = harnessView(task, spec.hiddenFields);
  writeFileSync(files.task, `${JSON.stringify(visible)}\n`);
  // Hidden fields are never written where a harness runs; earlier Rein versions put the whole task here.
  rmSync(path.join(dir, 'task-with-answer.json'), { force: true });
  const launch = (current: IssuedRollout): HarnessLaunch => ({
    issued: current,
    task: visible,
    taskFile: files.task,
    outputFile: outputOf(current.attempt),
    dir,
    env: spec.harnessEnv ?? {},
    signal: deps.signal,
    handedBack: () => deps.cancelIsFinal !== undefined && !deps.cancelIsFinal(),
  });

  // A log that cannot be uploaded costs the rollout nothing: it stays here, and the rollout's events say so for the console.
  const uploadLog = async (file: string, attempt: number) => {
    if (!deps.logUpload) return;
    const local = path.join(dir, file);
    const result = await uploadRolloutLog(deps.logUpload, rolloutId, local);
    if (result === null || 'uri' in result) return;
    deps.onWarning?.(`rollout ${rolloutId}: ${file} was not uploaded to the artifact store (${result.error}); it stays on this worker (${os.hostname()}) at ${local}`);
    await gateway
      .appendEvent(rolloutId, { type: 'custom', name: LOG_NOT_UPLOADED_EVENT, data: { file, attempt, reason: result.error, host: os.hostname(), path: local } })
      .catch((err: unknown) => deps.onWarning?.(`rollout ${rolloutId}: could not record that ${file} was not uploaded: ${(err as Error).message}`));
  };

  // Left running by a runner that died: follow its run if the executor still can, else that attempt is lost.
  let resumed: HarnessRun | null = null;
  if (issued.rollout.status === 'running') {
    // Scored, then the runner died before the status write: the score stands, the verifier does not run twice.
    const scored = (await gateway.listEvents(rolloutId)).filter((e) => e.attempt === issued.attempt && e.type === 'reward' && e.source === 'admin').at(-1);
    if (scored) return finishScored(gateway, base, issued.attempt, scored);
    resumed = (await deps.harness.resume?.(launch(issued))) ?? null;
    if (!resumed) {
      const reason = `the runner of attempt ${issued.attempt} stopped before it finished (its worker was lost); starting another`;
      await gateway.appendEvent(rolloutId, { type: 'custom', name: 'attempt_failed', data: { attempt: issued.attempt, failureClass: 'orchestrator', reason } });
      issued = await gateway.startAttempt(rolloutId);
    }
  }
  for (;;) {
    let run = resumed;
    resumed = null;
    if (!run) {
      await ready();
      await pace();
      if (issued.rollout.status === 'queued') await gateway.setStatus(rolloutId, { status: 'running', reason: `harness started (attempt ${issued.attempt})` });
      run = await deps.harness.run(launch(issued));
    }
    await uploadLog(`harness-${issued.attempt}.log`, issued.attempt);
    if (run.cancelled) return cancelled(deps, base, issued.attempt);
    const attemptEvents = (await gateway.listEvents(rolloutId)).filter((e) => e.attempt === issued.attempt);
    const failure = classifyFailure(
      run,
      run.exitCode === 0 && !run.timedOut && !run.problem ? [] : await gateway.listCalls(rolloutId, issued.attempt),
      attemptEvents,
      refusalPatterns,
    );
    if (failure?.failureClass === 'infrastructure' && issued.attempt < spec.maxAttempts) {
      await gateway.appendEvent(rolloutId, { type: 'custom', name: 'attempt_failed', data: { attempt: issued.attempt, ...failure } });
      const lost = failure.evidence?.upstreamStatus === 404 || failure.evidence?.errorClass === 'policy_unavailable';
      if (lost) await deps.onPolicyLost?.().catch(() => undefined); // if it cannot, the next attempt says why
      issued = await gateway.startAttempt(rolloutId);
      continue;
    }
    const unscored = { ...base, components: {}, harnessReportedReward: null, rewardDisagrees: false, attempts: issued.attempt };
    if (failure && (failure.failureClass === 'infrastructure' || failure.failureClass === 'environment')) {
      await gateway.setStatus(rolloutId, { status: 'failed', ...failure });
      return { ...unscored, status: 'failed', reward: null, failureClass: failure.failureClass, reason: failure.reason };
    }
    // The policy's own failures (a crash, a timeout, a bad reply) are scored like any run: they earn what they achieved.
    const verdict = await runVerifier(deps, spec.rewardWeights, rolloutId, { task, output: outputOf(issued.attempt) }, dir);
    await uploadLog('verifier.log', issued.attempt);
    if ('cancelled' in verdict) return cancelled(deps, base, issued.attempt);
    if ('error' in verdict) {
      await gateway.setStatus(rolloutId, { status: 'failed', reason: verdict.error, failureClass: 'verifier', evidence: verdict.evidence });
      return { ...unscored, status: 'failed', reward: null, failureClass: 'verifier', reason: verdict.error };
    }
    const reported = recordedRewards(attemptEvents).reported ?? null;
    const disagrees = reported !== null && rewardsDisagree(verdict.reward, reported);
    // The failure travels with the score, so a runner that dies before the status write can finish it from the event.
    const event = await gateway.appendEvent(rolloutId, {
      type: 'reward',
      value: verdict.reward,
      components: verdict.components,
      data: { weights: spec.rewardWeights, ...(reported !== null && { harnessReported: reported, disagrees }), ...(failure && { failure }) },
    });
    return finishScored(gateway, base, issued.attempt, event);
  }
}

/** A cancel ends the rollout; a worker going away leaves it running (its attempt is taken over on resume) and stops the batch. */
async function cancelled(deps: RunnerDeps, base: { rolloutId: string; taskId: string; sample: number }, attempt: number): Promise<RolloutOutcome> {
  if (deps.cancelIsFinal && !deps.cancelIsFinal()) {
    throw new RolloutsHandedBack(`the rollouts were interrupted (their worker is going away) at ${base.rolloutId} attempt ${attempt}; they resume where they stopped`);
  }
  await deps.gateway.setStatus(base.rolloutId, { status: 'cancelled', reason: 'the rollout batch was cancelled' });
  return { ...base, status: 'cancelled', reward: null, components: {}, harnessReportedReward: null, rewardDisagrees: false, failureClass: null, reason: 'cancelled', attempts: attempt };
}

/** Ends a scored attempt from its reward event: succeeded, or failed with the policy's failure the event carries. */
async function finishScored(gateway: GatewayControlClient, base: { rolloutId: string; taskId: string; sample: number }, attempt: number, event: RolloutEvent): Promise<RolloutOutcome> {
  const data = (event.payload.data ?? {}) as { harnessReported?: number; disagrees?: boolean; failure?: { failureClass: FailureClass; reason: string; evidence?: Record<string, unknown> } };
  const scored = {
    ...base,
    reward: event.payload.value as number,
    components: (event.payload.components as Record<string, number> | undefined) ?? {},
    harnessReportedReward: data.harnessReported ?? null,
    rewardDisagrees: data.disagrees ?? false,
    attempts: attempt,
  };
  if (data.failure) {
    await gateway.setStatus(base.rolloutId, { status: 'failed', ...data.failure });
    return { ...scored, status: 'failed', failureClass: data.failure.failureClass, reason: data.failure.reason };
  }
  await gateway.setStatus(base.rolloutId, { status: 'succeeded', reason: 'verified' });
  return { ...scored, status: 'succeeded', failureClass: null, reason: null };
}

/**
 * Runs the verifier on the whole task, hidden fields included. It runs only after the harness and
 * everything it started are gone, and gets the task on its standard input or in a file (0600, in a
 * private 0700 folder outside the rollouts tree) that is removed as soon as it exits.
 */
async function runVerifier(
  deps: RunnerDeps,
  weights: Record<string, number>,
  rolloutId: string,
  inputs: { task: Task; output: string },
  dir: string,
): Promise<{ reward: number; components: Record<string, number> } | { error: string; evidence: Record<string, unknown> } | { cancelled: true }> {
  const { verifier } = deps;
  if (!existsSync(inputs.output)) writeFileSync(inputs.output, 'null\n');
  const taskJson = `${JSON.stringify(inputs.task)}\n`;
  const taskDir = verifier.args.some((a) => a.includes('{task}')) ? mkdtempSync(path.join(os.tmpdir(), 'rein-verifier-')) : null;
  const taskFile = taskDir ? path.join(taskDir, 'task.json') : '';
  if (taskDir) writeFileSync(taskFile, taskJson, { mode: 0o600, flag: 'wx' });
  const run = await runCommand({
    command: verifier.command,
    args: withPlaceholders(verifier.args, { task: taskFile, output: inputs.output, rollout: rolloutId }),
    cwd: verifier.cwd,
    env: {
      ...allowedEnv(verifier.envAllow),
      ...verifier.env,
      REIN_ROLLOUT_ID: rolloutId,
      // Its own identity: it may read the rollout's journaled calls and events, and write nothing.
      REIN_GATEWAY_URL: deps.gateway.url,
      REIN_VERIFIER_KEY: await deps.gateway.verifierKey(rolloutId),
    },
    timeoutMs: verifier.timeoutMs,
    ...(verifier.taskOnStdin && { stdin: taskJson }),
    logFile: path.join(dir, 'verifier.log'),
    signal: deps.signal,
  }).finally(() => taskDir && rmSync(taskDir, { recursive: true, force: true }));
  // A verifier stopped by a cancel or a shutdown did not judge anything.
  if (run.cancelled) return { cancelled: true };
  const evidence = { verifierExitCode: run.exitCode, verifierKilledBy: run.killedBy, verifierLogTail: run.stderrTail.slice(-1000), seconds: Number(run.seconds.toFixed(3)) };
  if (run.spawnError) return { error: `the verifier could not start: ${run.spawnError}`, evidence };
  if (run.timedOut) return { error: `the verifier ran past its timeout (${run.seconds.toFixed(1)} s)`, evidence };
  if (run.exitCode !== 0) return { error: `the verifier exited with ${run.exitCode ?? run.killedBy}: ${run.stderrTail.trim().slice(-300)}`, evidence };
  const verdict = rewardOf(run.stdout, weights);
  return 'error' in verdict ? { ...verdict, evidence: { ...evidence, stdoutTail: run.stdout.slice(-500) } } : verdict;
}

/** Reads the verifier's last stdout line: `{"components": {name: number}}`, weighted into one reward. */
export function rewardOf(stdout: string, weights: Record<string, number>): { reward: number; components: Record<string, number> } | { error: string } {
  const last = stdout.trim().split('\n').at(-1) ?? '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    return { error: `the verifier printed no JSON (last line: ${JSON.stringify(last.slice(0, 200))}); it must print {"components": {...}}` };
  }
  const components = (parsed as { components?: unknown } | null)?.components;
  if (components === null || typeof components !== 'object' || Object.values(components).some((v) => typeof v !== 'number' || !Number.isFinite(v))) {
    return { error: `the verifier's JSON has no "components" object of finite numbers: ${last.slice(0, 200)}` };
  }
  const values = components as Record<string, number>;
  const missing = Object.keys(weights).filter((k) => !(k in values));
  if (missing.length > 0) return { error: `the verifier reported no ${missing.join(', ')}, which the reward weights use` };
  const reward = Object.entries(weights).reduce((sum, [k, w]) => sum + w * (values[k] as number), 0);
  return { reward, components: values };
}

function outcomeOf(base: { rolloutId: string; taskId: string; sample: number }, rollout: Rollout, events: RolloutEvent[]): RolloutOutcome {
  const reward = events.filter((e) => e.type === 'reward' && e.source === 'admin').at(-1)?.payload;
  const { reported, disagrees } = recordedRewards(events);
  return {
    ...base,
    status: rollout.status === 'succeeded' ? 'succeeded' : rollout.status === 'cancelled' ? 'cancelled' : 'failed',
    reward: typeof reward?.value === 'number' ? reward.value : null,
    components: (reward?.components as Record<string, number> | undefined) ?? {},
    harnessReportedReward: reported ?? null,
    rewardDisagrees: disagrees,
    failureClass: rollout.failureClass,
    reason: rollout.status === 'succeeded' ? null : rollout.statusReason,
    attempts: rollout.attempts,
  };
}
