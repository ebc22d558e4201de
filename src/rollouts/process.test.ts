import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HarnessLaunch } from './executor.js';
import { localExecutor } from './local-executor.js';
import { runCommand, type CommandSpec } from './process.js';
import { isRunning } from '../../test/helpers/processes.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'rein-process-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const bash = (script: string, extra: Partial<CommandSpec> = {}) =>
  runCommand({
    command: 'bash',
    args: ['-c', script, 'harness', dir],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    timeoutMs: 30_000,
    logFile: path.join(dir, 'run.log'),
    ...extra,
  });

const pidIn = (file: string) => Number(readFileSync(path.join(dir, file), 'utf8').trim());

/** A SIGKILL takes effect when the kernel next schedules the process: wait (generously) for it. */
async function gone(pid: number): Promise<boolean> {
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    if (!isRunning(pid)) return true;
  }
  return !isRunning(pid);
}

// A grandchild that leaves the process group (a new session) and keeps the harness's stdout open.
const escapedChild = `setsid bash -c 'echo $$ > "$1/escaped.pid"; exec sleep 300' escaped "$1" &
while [ ! -s "$1/escaped.pid" ]; do sleep 0.05; done`;

describe.skipIf(process.platform !== 'linux')('runCommand and the harness’s descendants', () => {
  it('ends a run when the harness exits 0, though a setsid grandchild holds its stdout, and kills that grandchild', async () => {
    const run = await bash(`${escapedChild}\necho done\nexit 0`);
    expect(run).toMatchObject({ exitCode: 0, killedBy: null, timedOut: false, cancelled: false, spawnError: null });
    expect(run.stdout).toContain('done');
    expect(await gone(pidIn('escaped.pid'))).toBe(true);
  });

  it('keeps exit 0 a success when a background child in the same group holds stdout', async () => {
    const run = await bash(`sleep 300 & echo $! > "$1/child.pid"\nexit 0`);
    expect(run).toMatchObject({ exitCode: 0, timedOut: false });
    expect(await gone(pidIn('child.pid'))).toBe(true);
  });

  it('keeps the exit code of a harness that fails while a grandchild holds its pipes', async () => {
    const run = await bash(`${escapedChild}\necho broken >&2\nexit 3`);
    expect(run).toMatchObject({ exitCode: 3, timedOut: false });
    expect(run.stderrTail).toContain('broken');
    expect(await gone(pidIn('escaped.pid'))).toBe(true);
  });

  it('times out a harness that never exits (and ignores SIGTERM), and kills it and its setsid grandchild', async () => {
    const run = await bash(`trap '' TERM\n${escapedChild}\necho $$ > "$1/main.pid"\nwhile true; do sleep 1; done`, {
      timeoutMs: 1500,
    });
    expect(run).toMatchObject({ timedOut: true, cancelled: false });
    expect(run.exitCode).not.toBe(0);
    expect(await gone(pidIn('main.pid'))).toBe(true);
    expect(await gone(pidIn('escaped.pid'))).toBe(true);
  });

  it('kills the setsid grandchildren of runs that end together, their sweeps shared', async () => {
    const runDir = (i: number) => path.join(dir, `run-${i}`);
    const runs = await Promise.all(
      [0, 1, 2, 3].map((i) => {
        mkdirSync(runDir(i));
        return runCommand({
          command: 'bash',
          args: ['-c', `${escapedChild}\nexit ${i}`, 'harness', runDir(i)],
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
          timeoutMs: 30_000,
          logFile: path.join(runDir(i), 'run.log'),
        });
      }),
    );
    expect(runs.map((r) => r.exitCode)).toEqual([0, 1, 2, 3]);
    for (const i of [0, 1, 2, 3])
      expect(await gone(Number(readFileSync(path.join(runDir(i), 'escaped.pid'), 'utf8').trim()))).toBe(true);
  });

  it('kills a cancelled harness’s setsid grandchild', async () => {
    const abort = new AbortController();
    const running = bash(`${escapedChild}\necho $$ > "$1/main.pid"\nsleep 300`, { signal: abort.signal });
    for (let i = 0; i < 600; i++) {
      try {
        pidIn('main.pid');
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    abort.abort();
    const run = await running;
    expect(run).toMatchObject({ cancelled: true, timedOut: false });
    expect(await gone(pidIn('main.pid'))).toBe(true);
    expect(await gone(pidIn('escaped.pid'))).toBe(true);
  });
});

describe('runCommand', () => {
  it('reports a command that cannot start', async () => {
    const run = await runCommand({
      command: path.join(dir, 'missing'),
      args: [],
      env: {},
      timeoutMs: 30_000,
      logFile: path.join(dir, 'run.log'),
    });
    expect(run.spawnError).toContain('ENOENT');
    expect(run.exitCode).toBeNull();
  });

  it('writes a log under the limit whole', async () => {
    const run = await bash('echo out; echo err >&2', { logLimitBytes: 1024 });
    expect(readFileSync(path.join(dir, 'run.log'), 'utf8').split('\n').sort()).toEqual(['', 'err', 'out']);
    expect(run).toMatchObject({ exitCode: 0, logBytes: 8, logTruncatedBytes: 0 });
  });

  it('redacts secrets before they reach the log on disk, by the built-in rules or the ones it is given', async () => {
    const secret = 'sk-abcdefghijklmnopqrstuvwxyz012345';
    await bash(
      `printf 'using ${secret.slice(0, 10)}'; sleep 0.05; printf '${secret.slice(10)} now\\ncode ZX-123\\n' >&2`,
    );
    const log = readFileSync(path.join(dir, 'run.log'), 'utf8');
    expect(log).not.toContain(secret.slice(3));
    expect(log).toBe('using [REDACTED:openai-key] now\ncode ZX-123\n');
    await bash('echo code ZX-123', { redaction: [{ name: 'ticket', regex: String.raw`ZX-\d+` }] });
    expect(readFileSync(path.join(dir, 'run.log'), 'utf8')).toBe('code [REDACTED:ticket]\n');
  });

  it('caps the log of a flooding command, keeping its head and its tail', async () => {
    const lines = 1_500_000; // "line N\n": about 20 MB
    const expected = Buffer.from(Array.from({ length: lines }, (_, i) => `line ${i}\n`).join(''));
    const limit = 64 * 1024;
    const run = await runCommand({
      command: process.execPath,
      args: [
        '-e',
        `let s = ''; for (let i = 0; i < ${lines}; i++) { s += 'line ' + i + '\\n'; if (s.length > 65536) { process.stdout.write(s); s = ''; } } process.stdout.write(s);`,
      ],
      env: {},
      timeoutMs: 120_000,
      logFile: path.join(dir, 'run.log'),
      logLimitBytes: limit,
    });
    expect(run).toMatchObject({ exitCode: 0, logBytes: expected.length, logTruncatedBytes: expected.length - limit });
    expect(run.stdout.length).toBe(1024 * 1024); // the stdout capture keeps its own limit
    const log = readFileSync(path.join(dir, 'run.log'));
    const marker = `\n[rein: ${expected.length - limit} bytes cut here; this log keeps the first ${limit / 2} and the last ${limit / 2} bytes]\n`;
    expect(log.length).toBeLessThanOrEqual(limit + marker.length);
    expect(log.subarray(0, limit / 2).equals(expected.subarray(0, limit / 2))).toBe(true);
    expect(log.subarray(limit / 2, limit / 2 + marker.length).toString()).toBe(marker);
    expect(log.subarray(-limit / 2).equals(expected.subarray(-limit / 2))).toBe(true);
  });
});

describe('localExecutor', () => {
  it('says how much of a harness’s log was cut', async () => {
    const launch = {
      issued: { baseUrl: 'http://127.0.0.1:1/v1', key: 'k', attempt: 1, rollout: { id: 'r-1' } },
      task: {},
      taskFile: path.join(dir, 'task.json'),
      outputFile: path.join(dir, 'output.json'),
      dir,
      env: {},
    } as unknown as HarnessLaunch;
    const harness = localExecutor({
      command: process.execPath,
      args: ['-e', `process.stderr.write('x'.repeat(20 * 1024 * 1024))`],
      timeoutMs: 120_000,
    });
    const run = await harness.run(launch);
    expect(run).toMatchObject({ exitCode: 0, timedOut: false });
    expect(run.logTruncatedBytes).toBe(20 * 1024 * 1024 - 8 * 1024 * 1024);
  });
});
