import path from 'node:path';
import { modelEndpointEnv, type HarnessExecutor, type HarnessLaunch, type HarnessRun } from './executor.js';
import { programProblems, type ProgramSpec } from './program.js';
import { runCommand, type CommandRunner } from './process.js';

const DEFAULT_ENV_ALLOW = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];

/**
 * Runs the harness as a local process in its own process group. Its run ends when it exits, times
 * out or is cancelled, and then everything it started is killed, daemons that left the group too.
 * `commands` spawns it: a worker's process launcher, or this process.
 */
export function localExecutor(spec: ProgramSpec, commands: CommandRunner = runCommand): HarnessExecutor {
  return {
    problems: async () => programProblems('harness', spec),
    async run(launch: HarnessLaunch): Promise<HarnessRun> {
      const { issued } = launch;
      const result = await commands({
        command: spec.command,
        args: withPlaceholders(spec.args, {
          task: launch.taskFile,
          output: launch.outputFile,
          rollout: issued.rollout.id,
        }),
        cwd: spec.cwd,
        env: {
          ...allowedEnv(spec.envAllow),
          ...spec.env,
          ...launch.env,
          ...modelEndpointEnv(issued),
          REIN_ROLLOUT_ID: issued.rollout.id,
          REIN_ATTEMPT: String(issued.attempt),
          // OpenTelemetry's variable for a process's parent span: a traced harness joins the rollout's trace.
          ...(issued.traceparent && { TRACEPARENT: issued.traceparent }),
          REIN_TASK_FILE: launch.taskFile,
          REIN_OUTPUT_FILE: launch.outputFile,
        },
        timeoutMs: spec.timeoutMs,
        ...(spec.taskOnStdin && { stdin: `${JSON.stringify(launch.task)}\n` }),
        logFile: path.join(launch.dir, `harness-${issued.attempt}.log`),
        ...(launch.redaction && { redaction: launch.redaction }),
        signal: launch.signal,
      });
      return {
        exitCode: result.exitCode,
        killedBy: result.killedBy,
        timedOut: result.timedOut,
        cancelled: result.cancelled,
        // A harness that cannot start here is a setup problem, not the policy's doing.
        problem:
          result.spawnError === null
            ? null
            : { failureClass: 'environment', reason: `the harness could not start: ${result.spawnError}` },
        logTail: result.stderrTail,
        logTruncatedBytes: result.logTruncatedBytes,
        seconds: result.seconds,
        where: { host: 'local', command: spec.command },
      };
    },
  };
}

export function withPlaceholders(
  args: readonly string[],
  values: { task: string; output: string; rollout: string },
): string[] {
  return args.map((a) =>
    a.replaceAll('{task}', values.task).replaceAll('{output}', values.output).replaceAll('{rollout}', values.rollout),
  );
}

export function allowedEnv(names: readonly string[] = DEFAULT_ENV_ALLOW): Record<string, string> {
  return Object.fromEntries(
    names.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name] as string]])),
  );
}
