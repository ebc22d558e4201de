import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { GatewayControlClient } from '../gateway/control-client.js';
import { ruleSources, type RedactionRule } from '../gateway/redact.js';
import { allowedEnv, withPlaceholders } from './local-executor.js';
import { runCommand, type CommandRunner } from './process.js';
import type { ProgramSpec } from './program.js';
import type { Task } from './tasks.js';

/** What running the verifier needs from the runner's dependencies. */
export interface VerifierDeps {
  verifier: ProgramSpec;
  gateway: GatewayControlClient;
  signal?: AbortSignal;
  /** What spawns the verifier: a worker's process launcher; default, this process. */
  commands?: CommandRunner;
  /** Where its log goes afterwards, redacted by these rules; its local log is redacted by them as it is written. */
  logUpload?: { redaction: readonly RedactionRule[] };
}

/**
 * Runs the verifier on the whole task, hidden fields included. It runs only after the harness and
 * everything it started are gone, and gets the task on its standard input or in a file (0600, in a
 * private 0700 folder outside the rollouts tree) that is removed as soon as it exits.
 */
export async function runVerifier(
  deps: VerifierDeps,
  weights: Record<string, number>,
  rolloutId: string,
  inputs: { task: Task; output: string },
  dir: string,
): Promise<
  | { reward: number; components: Record<string, number> }
  | { error: string; evidence: Record<string, unknown> }
  | { cancelled: true }
> {
  const { verifier } = deps;
  if (!existsSync(inputs.output)) writeFileSync(inputs.output, 'null\n');
  const taskJson = `${JSON.stringify(inputs.task)}\n`;
  const taskFile = verifier.args.some((a) => a.includes('{task}')) ? privateTaskFile() : '';
  if (taskFile) writeFileSync(taskFile, taskJson, { mode: 0o600, flag: 'wx' });
  const run = await (deps.commands ?? runCommand)({
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
    ...(deps.logUpload && { redaction: ruleSources(deps.logUpload.redaction) }),
    signal: deps.signal,
  }).finally(() => taskFile && rmSync(taskFile, { force: true }));
  // A verifier stopped by a cancel or a shutdown did not judge anything.
  if (run.cancelled) return { cancelled: true };
  const evidence = {
    verifierExitCode: run.exitCode,
    verifierKilledBy: run.killedBy,
    verifierLogTail: run.stderrTail.slice(-1000),
    seconds: Number(run.seconds.toFixed(3)),
  };
  if (run.spawnError) return { error: `the verifier could not start: ${run.spawnError}`, evidence };
  if (run.timedOut) return { error: `the verifier ran past its timeout (${run.seconds.toFixed(1)} s)`, evidence };
  if (run.exitCode !== 0)
    return {
      error: `the verifier exited with ${run.exitCode ?? run.killedBy}: ${run.stderrTail.trim().slice(-300)}`,
      evidence,
    };
  const verdict = rewardOf(run.stdout, weights);
  return 'error' in verdict ? { ...verdict, evidence: { ...evidence, stdoutTail: run.stdout.slice(-500) } } : verdict;
}

let privateDir: string | null = null;

/**
 * A new file name in this process's private folder (0700, made once): a folder made and removed
 * for each run cost more CPU under load than spawning the verifier did.
 */
function privateTaskFile(): string {
  if (!privateDir || !existsSync(privateDir)) privateDir = mkdtempSync(path.join(os.tmpdir(), 'rein-verifier-'));
  return path.join(privateDir, `task-${randomUUID()}.json`);
}

/** Reads the verifier's last stdout line: `{"components": {name: number}}`, weighted into one reward. */
export function rewardOf(
  stdout: string,
  weights: Record<string, number>,
): { reward: number; components: Record<string, number> } | { error: string } {
  const last = stdout.trim().split('\n').at(-1) ?? '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    return {
      error: `the verifier printed no JSON (last line: ${JSON.stringify(last.slice(0, 200))}); it must print {"components": {...}}`,
    };
  }
  const components = (parsed as { components?: unknown } | null)?.components;
  if (
    components === null ||
    typeof components !== 'object' ||
    Object.values(components).some((v) => typeof v !== 'number' || !Number.isFinite(v))
  ) {
    return { error: `the verifier's JSON has no "components" object of finite numbers: ${last.slice(0, 200)}` };
  }
  const values = components as Record<string, number>;
  const missing = Object.keys(weights).filter((k) => !(k in values));
  if (missing.length > 0)
    return { error: `the verifier reported no ${missing.join(', ')}, which the reward weights use` };
  const reward = Object.entries(weights).reduce((sum, [k, w]) => sum + w * (values[k] as number), 0);
  return { reward, components: values };
}
