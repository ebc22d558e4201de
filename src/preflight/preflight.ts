import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

export interface PreflightCheck {
  name: string;
  ok: boolean;
  detail: string;
}

/** What a worker host can do for Rein, as `rein doctor` reports it. */
export interface HostReport {
  host: string;
  pid: number;
  node: string;
  dataDir: string;
  checks: PreflightCheck[];
}

export interface HostCheckOptions {
  dataDir: string;
  /** Below this much free space in dataDir the disk check fails. */
  minFreeBytes?: number;
}

const MIN_NODE: [number, number] = [20, 19];

/** Checks the worker host: Node version, a writable data directory, free disk space. */
export async function checkWorkerHost(options: HostCheckOptions): Promise<HostReport> {
  const checks = [
    checkNodeVersion(process.versions.node),
    await checkWritable(options.dataDir),
    await checkFreeSpace(options.dataDir, options.minFreeBytes ?? 1024 ** 3),
  ];
  return { host: os.hostname(), pid: process.pid, node: process.versions.node, dataDir: options.dataDir, checks };
}

export function checkNodeVersion(version: string): PreflightCheck {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const ok = major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1]);
  return {
    name: 'node version',
    ok,
    detail: ok ? `Node ${version}` : `Node ${version}; Rein needs ${MIN_NODE.join('.')} or newer`,
  };
}

async function checkWritable(dataDir: string): Promise<PreflightCheck> {
  const probe = path.join(dataDir, `.preflight-${randomUUID()}`);
  try {
    await mkdir(dataDir, { recursive: true });
    const token = randomUUID();
    await writeFile(probe, token, { flush: true });
    const readBack = await readFile(probe, 'utf8');
    if (readBack !== token) return { name: 'data dir writable', ok: false, detail: `${dataDir}: read back differs` };
    return { name: 'data dir writable', ok: true, detail: dataDir };
  } catch (err) {
    return { name: 'data dir writable', ok: false, detail: `${dataDir}: ${(err as Error).message}` };
  } finally {
    await rm(probe, { force: true }).catch(() => undefined);
  }
}

async function checkFreeSpace(dataDir: string, minFreeBytes: number): Promise<PreflightCheck> {
  try {
    const stats = await statfs(dataDir);
    const free = stats.bavail * stats.bsize;
    const ok = free >= minFreeBytes;
    return {
      name: 'free disk space',
      ok,
      detail: `${formatBytes(free)} free in ${dataDir}${ok ? '' : `; need at least ${formatBytes(minFreeBytes)}`}`,
    };
  } catch (err) {
    return { name: 'free disk space', ok: false, detail: `${dataDir}: ${(err as Error).message}` };
  }
}

function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
