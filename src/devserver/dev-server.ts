import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync, closeSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import type { DevServerSettings } from '../config/schema.js';

const execFileAsync = promisify(execFile);

export interface DevServerOptions extends DevServerSettings {
  /** Absolute path of the `temporal` binary (see findTemporalCli). */
  cliPath: string;
  /** Namespaces to create besides `default`. */
  namespaces?: string[];
  /** Where the server's own output goes; default: next to dbFile. */
  logFile?: string;
  /** How long to wait for the server to report SERVING. Generous: 2 busy cores can take a while. */
  readyTimeoutMs?: number;
}

export interface DevServer {
  /** host:port of the gRPC frontend. */
  address: string;
  /** Web UI address, or undefined when headless. */
  uiUrl: string | undefined;
  logFile: string;
  pid: number;
  /** Resolves with the exit code once the server process has ended. */
  exited: Promise<number | null>;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period) and waits for it to exit. */
  stop(): Promise<void>;
}

export class DevServerStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DevServerStartError';
  }
}

/** Starts `temporal server start-dev` with a persistent SQLite file and waits until it serves. */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const address = `${options.ip}:${options.port}`;
  await assertPortFree(options.ip, options.port, 'gRPC', 'temporal.devServer.port');
  if (!options.headless) await assertPortFree(options.ip, options.uiPort, 'Web UI', 'temporal.devServer.uiPort');
  const { httpPort, metricsPort } = pinnedPorts(options);
  await assertPortFree(options.ip, httpPort, 'HTTP API', 'temporal.devServer.httpPort');
  await assertPortFree(options.ip, metricsPort, 'metrics', 'temporal.devServer.metricsPort');

  mkdirSync(path.dirname(options.dbFile), { recursive: true });
  const logFile = options.logFile ?? path.join(path.dirname(options.dbFile), 'server.log');
  const logFd = openSync(logFile, 'a');
  const child = spawn(options.cliPath, devServerArgs(options), { stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);

  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.once('error', () => resolve(null));
  });
  const spawnFailed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new DevServerStartError(`could not run ${options.cliPath}: ${err.message}`)));
  });

  const server: DevServer = {
    address,
    uiUrl: options.headless ? undefined : `http://${options.ip}:${options.uiPort}`,
    logFile,
    pid: child.pid ?? -1,
    exited,
    stop: () => stopProcess(child, exited),
  };
  try {
    await Promise.race([
      spawnFailed,
      waitUntilServing(options.cliPath, address, options.readyTimeoutMs ?? 60_000, exited, logFile),
    ]);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

/**
 * The ports the CLI would otherwise pick at random, pinned so a firewall rule or a scrape config can name them. Its
 * history, matching and worker services still listen on three free loopback ports it picks itself (no flag sets them).
 */
export function pinnedPorts(options: Pick<DevServerOptions, 'port' | 'httpPort' | 'metricsPort'>) {
  return { httpPort: options.httpPort ?? options.port + 10, metricsPort: options.metricsPort ?? options.port + 11 };
}

export function devServerArgs(options: DevServerOptions): string[] {
  const { httpPort, metricsPort } = pinnedPorts(options);
  const args = [
    'server',
    'start-dev',
    '--ip',
    options.ip,
    '--port',
    String(options.port),
    '--http-port',
    String(httpPort),
    '--metrics-port',
    String(metricsPort),
    '--db-filename',
    options.dbFile,
    '--log-level',
    options.logLevel,
  ];
  if (options.headless) args.push('--headless');
  else args.push('--ui-port', String(options.uiPort), '--ui-disable-news-fetch');
  for (const namespace of options.namespaces ?? []) {
    if (namespace !== 'default') args.push('--namespace', namespace);
  }
  return args;
}

async function waitUntilServing(
  cliPath: string,
  address: string,
  timeoutMs: number,
  exited: Promise<number | null>,
  logFile: string,
): Promise<void> {
  let exitCode: number | null | undefined;
  void exited.then((code) => (exitCode = code));
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exitCode !== undefined) {
      throw new DevServerStartError(
        `the Temporal dev server exited with code ${String(exitCode)} before it was ready; its log (${logFile}) ends with:\n${tail(logFile)}`,
      );
    }
    if (await isServing(cliPath, address)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new DevServerStartError(
    `the Temporal dev server at ${address} was not ready after ${timeoutMs} ms; its log (${logFile}) ends with:\n${tail(logFile)}`,
  );
}

/** True when the frontend at `address` answers the health check with SERVING. */
export async function isServing(cliPath: string, address: string): Promise<boolean> {
  try {
    const { stdout } = await execFileAsync(cliPath, ['operator', 'cluster', 'health', '--address', address], {
      timeout: 5_000,
    });
    return stdout.includes('SERVING') && !stdout.includes('NOT_SERVING');
  } catch {
    return false;
  }
}

async function assertPortFree(host: string, port: number, what: string, setting: string): Promise<void> {
  const free = await new Promise<boolean>((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
  if (!free) {
    throw new DevServerStartError(
      `port ${port} on ${host} (the dev server's ${what}) is already in use — is another Temporal server running? ` +
        `Stop it, choose another port with ${setting}, or set TEMPORAL_ADDRESS to use the running server.`,
    );
  }
}

async function stopProcess(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}
