import { statSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { withEmbeddedDefault } from '../config/embedded-default.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { configDefaults, type ReinConfig } from '../config/schema.js';
import { createLogger, type Logger } from '../log/logger.js';
import { prettyDestination } from './pretty-log.js';

export interface GlobalOptions {
  config?: string;
}

export interface CliContext extends LoadedConfig {
  logger: Logger;
}

/** Whether the last command read a config file; its errors say so when it did not (see main.ts). */
export let configFileUsed: string | undefined | null = null;

export function cliContext(options: GlobalOptions): CliContext {
  const loaded = loadConfig({ file: options.config });
  configFileUsed = loaded.file;
  return { ...loaded, logger: loggerFor(loaded.config.log.level) };
}

/**
 * The settings help texts show (where services listen): those of the config this command line
 * would read (--config before or after the command, else REIN_CONFIG, else rein.yaml in `cwd`),
 * with the environment applied; else the schema's defaults. Never throws: a config that cannot
 * be read is the command's to report when it runs.
 */
export function helpSettings(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv | undefined; cwd?: string | undefined } = {},
): ReinConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const file = configOption(args) ?? env.REIN_CONFIG;
  try {
    // A regular file only: a pipe (--config <(…)) read here would be empty when the command reads it.
    if (file && !statSync(path.resolve(cwd, file)).isFile()) throw new Error(`${file} is not a regular file`);
    return loadConfig({ file, env, cwd }).config;
  } catch {
    return defaultSettings();
  }
}

/**
 * The settings of no config file and no environment: the schema's defaults, with the embedded default filled in as
 * loadConfig fills it.
 */
export function defaultSettings(): ReinConfig {
  return withEmbeddedDefault(configDefaults());
}

/** The file a command line gives -c/--config (the last one, as commander takes it), in any of its forms. */
export function configOption(args: readonly string[]): string | undefined {
  let file: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') break;
    if (arg === '-c' || arg === '--config') file = args[++i];
    else if (arg.startsWith('--config=')) file = arg.slice('--config='.length);
    else if (arg.startsWith('-c') && !arg.startsWith('--')) file = arg.slice(2);
  }
  return file;
}

/** host:port of a listening service, as help and messages show it (an IPv6 address in brackets). */
export function listenAddress(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** host:port of the configured Temporal server, or of the embedded dev server (as Rein connects to it). */
export function temporalAddress(config: ReinConfig): string {
  const { address, devServer } = config.temporal;
  return address ?? `${devServer.ip}:${devServer.port}`;
}

/**
 * Where the embedded dev server and its Web UI listen, for help texts:
 * "on localhost:7233 (Web UI on http://localhost:8233)".
 */
export function devServerHelp(config: ReinConfig): string {
  const { devServer } = config.temporal;
  return `on ${devServer.ip}:${devServer.port} (${devServer.headless ? 'no Web UI: temporal.devServer.headless' : `Web UI on http://${devServer.ip}:${devServer.uiPort}`})`;
}

/** Pretty lines on a terminal, JSON lines (for log collectors) everywhere else. */
export function loggerFor(
  level: ReinConfig['log']['level'],
  err: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): Logger {
  return err.isTTY
    ? createLogger(level, 'rein', prettyDestination(err))
    : createLogger(
        level,
        'rein',
        err === process.stderr ? undefined : { write: (line: string) => void err.write(line) },
      );
}

/**
 * Resolves on the first SIGINT or SIGTERM, so a command can shut down in order (a second one kills the process).
 * Call it before the command says it is ready: whoever reads "ready" may signal at once, and a signal with no
 * listener yet kills the process without its shutdown.
 */
export function untilInterrupted(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const handler = (signal: NodeJS.Signals) => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
      resolve(signal);
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
  });
}

/** Runs `use` with a client of the configured Temporal server, then closes the connection. */
export async function withClient<T>(config: ReinConfig, use: (client: Client) => Promise<T>): Promise<T> {
  // Loaded here, not with this module: every command imports this one, and the gateway or the policy server never talk
  // to Temporal.
  const { connectTemporal } = await import('../client/temporal.js');
  const temporal = await connectTemporal(config.temporal);
  try {
    return await use(temporal.client);
  } finally {
    await temporal.close();
  }
}

/** The Web UI of the embedded dev server, when Rein runs one with a UI. */
export function temporalUiUrl(config: ReinConfig): string | undefined {
  const { address, devServer } = config.temporal;
  return address || devServer.headless ? undefined : `http://${devServer.ip}:${devServer.uiPort}`;
}

export function workflowUrl(uiUrl: string, namespace: string, workflowId: string, runId: string): string {
  return `${uiUrl}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/${runId}/history`;
}
