import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

/** A program the runner starts as a local process: the harness, or the verifier. */
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
  /** Also write the task (JSON) to the program's standard input. */
  taskOnStdin?: boolean;
}

/**
 * Checks, before anything launches, that a program can start here: the command resolves to an
 * executable file and the working directory exists. Returns the problems, each naming the fix.
 */
export function programProblems(name: string, spec: ProgramSpec, env: NodeJS.ProcessEnv = process.env): string[] {
  const problems: string[] = [];
  if (spec.cwd !== undefined && !isDirectory(spec.cwd)) problems.push(`${name}.cwd: ${spec.cwd} is not a directory`);
  const searchPath = spec.env?.PATH ?? env.PATH ?? '';
  const candidates = spec.command.includes('/')
    ? [path.resolve(spec.cwd ?? '.', spec.command)]
    : searchPath
        .split(path.delimiter)
        .filter(Boolean)
        .map((dir) => path.join(dir, spec.command));
  if (!candidates.some(isExecutable)) {
    problems.push(
      spec.command.includes('/')
        ? `${name}.command: ${candidates[0]} is not an executable file; fix the path or make it executable`
        : `${name}.command: "${spec.command}" is not on PATH; install it, or give its full path`,
    );
  }
  return problems;
}

function isDirectory(dir: string): boolean {
  try {
    return statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
