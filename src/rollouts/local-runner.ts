import { setMaxListeners } from 'node:events';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { GatewayControlClient, IssuedRollout } from '../gateway/control-client.js';
import type { CallRecord } from '../store/trace-store.js';
import { programProblems } from './harness-spec.js';
import { runCommand, type CommandResult } from './process.js';
import { isFinished, type FailureClass, type Rollout, type RolloutMode } from './rollout.js';
import { harnessView, type Task } from './tasks.js';

/**
 * Runs a harness on tasks as local processes through the gateway, scores each run with a
 * verifier that runs apart from the harness, and records the outcome on the rollout.
 */
/** A program the runner starts: the harness, or the verifier. */
export interface ProgramSpec {
  command: string;
  /**
   * Placeholders: `{task}` (the harness gets the task without its hidden fields, the verifier the
   * whole task), `{output}` (the file the harness writes its output to), `{rollout}` (the id).
   */
  args: string[];
  cwd?: string | undefined;
  /** Fixed variables for the program. */
  env?: Record<string, string>;
  /** Variables copied from the runner's environment; nothing else is inherited. */
  envAllow?: string[];
  timeoutMs: number;
}
export type LocalHarnessSpec = ProgramSpec;
export type VerifierSpec = ProgramSpec;

export interface RolloutBatchSpec {
  /** Rollout ids are `<batchId>.<task id>.<sample>`: running the same batch again resumes it. */
  batchId: string;
  tasks: Task[];
  samplesPerTask: number;
  mode: RolloutMode;
  policyVersion: string;
  /** Task fields the harness must not see (the expected answer). */
  hiddenFields: string[];
  /** reward = Σ weight × component; the verifier's components are all stored. */
  rewardWeights: Record<string, number>;
  concurrency: number;
  /** Attempts per rollout; only infrastructure failures start another. */
  maxAttempts: number;
  workDir: string;
  /** Recorded on every rollout: the harness ledger's key. */
  harnessVersion?: string;
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
  failureClass: FailureClass | null;
  reason: string | null;
  attempts: number;
}

export interface RunnerDeps {
  gateway: GatewayControlClient;
  harness: LocalHarnessSpec;
  verifier: VerifierSpec;
  onFinished?: (outcome: RolloutOutcome, done: number, total: number) => void;
  signal?: AbortSignal;
}

const DEFAULT_ENV_ALLOW = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];

/** Upstream trouble the policy did not cause: the rollout is retried as a new attempt. */
const INFRASTRUCTURE_CALL_ERRORS = new Set<CallRecord['errorClass']>(['upstream_unreachable', 'upstream_timeout', 'upstream_stream_cut', 'upstream_bad_response', 'gateway_error']);

export async function runRollouts(spec: RolloutBatchSpec, deps: RunnerDeps): Promise<RolloutOutcome[]> {
  const problems = [
    ...(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/.test(spec.batchId) ? [] : [`batch id "${spec.batchId}" may hold letters, digits and . _ : - only`]),
    ...programProblems('harness', deps.harness),
    ...programProblems('verifier', deps.verifier),
  ];
  if (problems.length > 0) throw new RolloutSetupError(problems);
  // Every running harness and verifier listens for cancellation on the one signal.
  if (deps.signal) setMaxListeners(2 * spec.concurrency + 10, deps.signal);
  const jobs = spec.tasks.flatMap((task) => Array.from({ length: spec.samplesPerTask }, (_, sample) => ({ task, sample })));
  const outcomes: RolloutOutcome[] = new Array(jobs.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const index = next++;
      const { task, sample } = jobs[index] as { task: Task; sample: number };
      const outcome = await runOne(spec, deps, task, sample);
      outcomes[index] = outcome;
      deps.onFinished?.(outcome, ++done, jobs.length);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(spec.concurrency, jobs.length)) }, worker));
  return outcomes;
}

/** A rollout's id within its batch: stable, so a batch run again finds its rollouts. */
export function rolloutIdFor(batchId: string, taskId: string, sample: number): string {
  return `${batchId}.${taskId.replace(/[^A-Za-z0-9._:-]/g, '_')}.${sample}`;
}

async function runOne(spec: RolloutBatchSpec, deps: RunnerDeps, task: Task, sample: number): Promise<RolloutOutcome> {
  const { gateway } = deps;
  const rolloutId = rolloutIdFor(spec.batchId, task.id, sample);
  let issued = await gateway.createRollout({
    id: rolloutId,
    taskId: task.id,
    mode: spec.mode,
    policyVersion: spec.policyVersion,
    metadata: { ...spec.metadata, batchId: spec.batchId, sample, ...(spec.harnessVersion && { harnessVersion: spec.harnessVersion }) },
  });
  const base = { rolloutId, taskId: task.id, sample };
  if (isFinished(issued.rollout.status)) return outcomeOf(base, issued.rollout, await gateway.listEvents(rolloutId));
  // Left running by a runner that died: that attempt is lost; start a fresh one.
  if (issued.rollout.status === 'running') issued = await gateway.startAttempt(rolloutId);

  const dir = path.join(spec.workDir, rolloutId);
  mkdirSync(dir, { recursive: true });
  const files = { task: path.join(dir, 'task.json'), fullTask: path.join(dir, 'task-with-answer.json'), output: path.join(dir, 'output.json') };
  writeFileSync(files.task, `${JSON.stringify(harnessView(task, spec.hiddenFields))}\n`);
  writeFileSync(files.fullTask, `${JSON.stringify(task)}\n`);

  for (;;) {
    if (issued.rollout.status === 'queued') await gateway.setStatus(rolloutId, { status: 'running', reason: `harness started (attempt ${issued.attempt})` });
    const run = await runHarness(deps, issued, files, dir);
    if (run.cancelled) {
      await gateway.setStatus(rolloutId, { status: 'cancelled', reason: 'the rollout batch was cancelled' });
      return { ...base, status: 'cancelled', reward: null, components: {}, failureClass: null, reason: 'cancelled', attempts: issued.attempt };
    }
    const failure = await classifyRun(gateway, issued, run);
    if (failure?.failureClass === 'infrastructure' && issued.attempt < spec.maxAttempts) {
      issued = await gateway.startAttempt(rolloutId);
      continue;
    }
    if (failure && (failure.failureClass === 'infrastructure' || failure.failureClass === 'environment')) {
      await gateway.setStatus(rolloutId, { status: 'failed', reason: failure.reason, failureClass: failure.failureClass });
      return { ...base, status: 'failed', reward: null, components: {}, failureClass: failure.failureClass, reason: failure.reason, attempts: issued.attempt };
    }
    // The policy's own failures (a crash, a timeout) are scored like any run: they earn what they achieved.
    const verdict = await runVerifier(deps, spec.rewardWeights, rolloutId, files, dir);
    if ('error' in verdict) {
      await gateway.setStatus(rolloutId, { status: 'failed', reason: verdict.error, failureClass: 'verifier' });
      return { ...base, status: 'failed', reward: null, components: {}, failureClass: 'verifier', reason: verdict.error, attempts: issued.attempt };
    }
    await gateway.appendEvent(rolloutId, { type: 'reward', value: verdict.reward, components: verdict.components, data: { weights: spec.rewardWeights } });
    if (failure) {
      await gateway.setStatus(rolloutId, { status: 'failed', reason: failure.reason, failureClass: failure.failureClass });
      return { ...base, status: 'failed', reward: verdict.reward, components: verdict.components, failureClass: failure.failureClass, reason: failure.reason, attempts: issued.attempt };
    }
    await gateway.setStatus(rolloutId, { status: 'succeeded', reason: 'verified' });
    return { ...base, status: 'succeeded', reward: verdict.reward, components: verdict.components, failureClass: null, reason: null, attempts: issued.attempt };
  }
}

function runHarness(deps: RunnerDeps, issued: IssuedRollout, files: { task: string; output: string }, dir: string): Promise<CommandResult> {
  const { harness } = deps;
  return runCommand({
    command: harness.command,
    args: withPlaceholders(harness.args, { task: files.task, output: files.output, rollout: issued.rollout.id }),
    cwd: harness.cwd,
    env: {
      ...allowed(harness.envAllow),
      ...harness.env,
      OPENAI_BASE_URL: issued.baseUrl,
      OPENAI_API_KEY: issued.key,
      REIN_ROLLOUT_ID: issued.rollout.id,
      REIN_ATTEMPT: String(issued.attempt),
      REIN_TASK_FILE: files.task,
      REIN_OUTPUT_FILE: files.output,
    },
    timeoutMs: harness.timeoutMs,
    logFile: path.join(dir, `harness-${issued.attempt}.log`),
    signal: deps.signal,
  });
}

async function classifyRun(
  gateway: GatewayControlClient,
  issued: IssuedRollout,
  run: CommandResult,
): Promise<{ failureClass: FailureClass; reason: string } | null> {
  if (run.spawnError) return { failureClass: 'environment', reason: `the harness could not start: ${run.spawnError}` };
  if (run.timedOut) return { failureClass: 'timeout', reason: `the harness ran past its timeout (${run.seconds.toFixed(1)} s)` };
  if (run.exitCode === 0) return null;
  const calls = await gateway.listCalls(issued.rollout.id, issued.attempt);
  const broken = calls.find((c) => INFRASTRUCTURE_CALL_ERRORS.has(c.errorClass ?? null) || (c.upstreamStatus ?? 0) >= 500);
  const how = run.exitCode === null ? `was killed by ${run.killedBy}` : `exited with ${run.exitCode}`;
  const stderr = run.stderrTail.trim().split('\n').slice(-3).join(' | ');
  if (broken) {
    return { failureClass: 'infrastructure', reason: `the harness ${how} after model call ${broken.id} failed upstream (${broken.errorClass ?? broken.upstreamStatus}): ${stderr}` };
  }
  return { failureClass: 'harness', reason: `the harness ${how}: ${stderr || '(no stderr)'}` };
}

async function runVerifier(
  deps: RunnerDeps,
  weights: Record<string, number>,
  rolloutId: string,
  files: { fullTask: string; output: string },
  dir: string,
): Promise<{ reward: number; components: Record<string, number> } | { error: string }> {
  const { verifier } = deps;
  if (!existsSync(files.output)) writeFileSync(files.output, 'null\n');
  const run = await runCommand({
    command: verifier.command,
    args: withPlaceholders(verifier.args, { task: files.fullTask, output: files.output, rollout: rolloutId }),
    cwd: verifier.cwd,
    env: {
      ...allowed(verifier.envAllow),
      ...verifier.env,
      REIN_ROLLOUT_ID: rolloutId,
      // Its own identity: it may read the rollout's journaled calls and events, and write nothing.
      REIN_GATEWAY_URL: deps.gateway.url,
      REIN_VERIFIER_KEY: await deps.gateway.verifierKey(rolloutId),
    },
    timeoutMs: verifier.timeoutMs,
    logFile: path.join(dir, 'verifier.log'),
    signal: deps.signal,
  });
  if (run.spawnError) return { error: `the verifier could not start: ${run.spawnError}` };
  if (run.timedOut) return { error: `the verifier ran past its timeout (${run.seconds.toFixed(1)} s)` };
  if (run.exitCode !== 0) return { error: `the verifier exited with ${run.exitCode ?? run.killedBy}: ${run.stderrTail.trim().slice(-300)}` };
  return rewardOf(run.stdout, weights);
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

function outcomeOf(base: { rolloutId: string; taskId: string; sample: number }, rollout: Rollout, events: Array<{ type: string; source: string; payload: Record<string, unknown> }>): RolloutOutcome {
  const reward = events.filter((e) => e.type === 'reward' && e.source === 'admin').at(-1)?.payload;
  return {
    ...base,
    status: rollout.status === 'succeeded' ? 'succeeded' : rollout.status === 'cancelled' ? 'cancelled' : 'failed',
    reward: typeof reward?.value === 'number' ? reward.value : null,
    components: (reward?.components as Record<string, number> | undefined) ?? {},
    failureClass: rollout.failureClass,
    reason: rollout.status === 'succeeded' ? null : rollout.statusReason,
    attempts: rollout.attempts,
  };
}

function withPlaceholders(args: readonly string[], values: { task: string; output: string; rollout: string }): string[] {
  return args.map((a) => a.replaceAll('{task}', values.task).replaceAll('{output}', values.output).replaceAll('{rollout}', values.rollout));
}

function allowed(names: readonly string[] = DEFAULT_ENV_ALLOW): Record<string, string> {
  return Object.fromEntries(names.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name] as string]])));
}
