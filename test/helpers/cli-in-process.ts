import { vi } from 'vitest';
import { main } from '../../src/cli/main.js';

/** `rein ARGS` in this process: the CLI's own entry point and exit code, without a child process's start-up. */
export async function reinInProcess(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    const code = await main(['node', 'rein', ...args]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    process.exitCode = undefined;
  }
}

/**
 * `rein ARGS` in this process with `env` applied as runRein applies it (an undefined value removes the variable), for
 * the command's duration only. One command at a time: they share this process's stdout and environment.
 */
export async function reinInProcessWith(
  env: Record<string, string | undefined>,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  const saved = Object.keys(env).map((key) => [key, process.env[key]] as const);
  for (const [key, value] of Object.entries(env))
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  try {
    return await reinInProcess(...args);
  } finally {
    for (const [key, value] of saved)
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
  }
}
