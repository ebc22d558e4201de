import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { assertFreeSpace, DEFAULT_MIN_FREE_MEGABYTES, DiskSpaceError, formatBytes, megabytes } from './disk-space.js';

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
  /** Below this much free space in dataDir the disk check fails (storage.minFreeMegabytes; 0: no check). */
  minFreeBytes?: number;
}

const MIN_NODE: [number, number] = [20, 19];

/** Checks the worker host: Node version, a writable data directory, free disk space. */
export async function checkWorkerHost(options: HostCheckOptions): Promise<HostReport> {
  const checks = [
    checkNodeVersion(process.versions.node),
    await checkWritable(options.dataDir),
    await checkFreeSpace(options.dataDir, options.minFreeBytes ?? megabytes(DEFAULT_MIN_FREE_MEGABYTES)),
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
  const name = 'free disk space';
  try {
    const free = await assertFreeSpace(dataDir, minFreeBytes);
    return {
      name,
      ok: true,
      detail:
        free === undefined ? 'not checked (storage.minFreeMegabytes is 0)' : `${formatBytes(free)} free in ${dataDir}`,
    };
  } catch (err) {
    return {
      name,
      ok: false,
      detail: err instanceof DiskSpaceError ? err.message : `${dataDir}: ${(err as Error).message}`,
    };
  }
}
