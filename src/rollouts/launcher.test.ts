import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LauncherLostError, ProcessLauncher } from './launcher.js';
import type { CommandSpec } from './process.js';
import { isRunning } from '../../test/helpers/processes.js';

let dir: string;
let launcher: ProcessLauncher;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'rein-launcher-'));
  launcher = new ProcessLauncher();
});
afterAll(async () => {
  await launcher.close();
  rmSync(dir, { recursive: true, force: true });
});

const bash = (script: string, extra: Partial<CommandSpec> = {}): CommandSpec => ({
  command: 'bash',
  args: ['-c', script, 'harness', dir],
  env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  timeoutMs: 30_000,
  logFile: path.join(dir, 'run.log'),
  ...extra,
});

/** Waits for a file a script writes, then reads the number in it. */
async function pidFrom(file: string): Promise<number> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    const text = (() => {
      try {
        return readFileSync(path.join(dir, file), 'utf8').trim();
      } catch {
        return '';
      }
    })();
    if (/^\d+$/.test(text)) return Number(text);
  }
  throw new Error(`${file} was never written`);
}

async function gone(pid: number): Promise<boolean> {
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    if (!isRunning(pid)) return true;
  }
  return false;
}

// A grandchild that leaves the process group (a new session), as a daemon would.
const escaped = (name: string) => `setsid bash -c 'echo $$ > "$1/${name}"; exec sleep 300' escaped "$1" &`;

describe.skipIf(process.platform !== 'linux')('the process launcher', () => {
  it('runs a command as runCommand does: exit code, stdout, stderr, the log, and a setsid grandchild killed', async () => {
    const run = await launcher.run(
      bash(`${escaped('daemon.pid')}\nread line; echo "got $line"; echo oops >&2; exit 3`, { stdin: 'task\n' }),
    );
    expect(run).toMatchObject({ exitCode: 3, killedBy: null, timedOut: false, cancelled: false, spawnError: null });
    expect(run.stdout).toBe('got task\n');
    expect(run.stderrTail).toContain('oops\n');
    expect(readFileSync(path.join(dir, 'run.log'), 'utf8')).toContain('got task');
    expect(await gone(await pidFrom('daemon.pid'))).toBe(true);
  });

  it('reports a command that cannot start, and stops a cancelled one with its descendants', async () => {
    const missing = await launcher.run(bash('', { command: path.join(dir, 'no-such-harness') }));
    expect(missing.spawnError).toMatch(/ENOENT/);

    const abort = new AbortController();
    const running = launcher.run(bash(`${escaped('cancelled.pid')}\nsleep 300`, { signal: abort.signal }));
    const daemon = await pidFrom('cancelled.pid');
    abort.abort();
    expect(await running).toMatchObject({ cancelled: true, timedOut: false });
    expect(await gone(daemon)).toBe(true);
  });

  it('rejects the runs in flight when the launcher dies, and starts a new one for the next run', async () => {
    const running = launcher.run(bash(`echo $PPID > "$1/launcher.pid"; exec sleep 300`));
    const launcherPid = await pidFrom('launcher.pid');
    process.kill(launcherPid, 'SIGKILL');
    await expect(running).rejects.toBeInstanceOf(LauncherLostError);
    const next = await launcher.run(bash('echo $PPID'));
    expect(next.exitCode).toBe(0);
    expect(Number(next.stdout.trim())).not.toBe(launcherPid);
  });

  it('kills what it runs, and exits, when its worker dies', async () => {
    // A worker stand-in: a process with its own launcher running a harness that would sleep for 5 minutes.
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const module = pathToFileURL(path.join(import.meta.dirname, 'launcher.ts')).href;
    const harness = `echo $PPID > "$1/orphan-launcher.pid"; ${escaped('orphan.pid')} exec sleep 300`;
    const script = `import { ProcessLauncher } from ${JSON.stringify(module)};
      void new ProcessLauncher().run({ command: 'bash', args: ['-c', ${JSON.stringify(harness)}, 'h', ${JSON.stringify(dir)}],
        env: { PATH: process.env.PATH }, timeoutMs: 600000, logFile: ${JSON.stringify(path.join(dir, 'orphan.log'))} });`;
    const worker = spawn(process.execPath, ['--import', tsx, '--input-type=module', '-e', script], { stdio: 'ignore' });
    const launcherPid = await pidFrom('orphan-launcher.pid');
    const daemon = await pidFrom('orphan.pid');
    worker.kill('SIGKILL');
    expect(await gone(daemon)).toBe(true);
    expect(await gone(launcherPid)).toBe(true);
  });
});
