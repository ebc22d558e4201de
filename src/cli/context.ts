import type { Client } from '@temporalio/client';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import type { ReinConfig } from '../config/schema.js';
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

/** Pretty lines on a terminal, JSON lines (for log collectors) everywhere else. */
export function loggerFor(level: ReinConfig['log']['level'], err: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr): Logger {
  return err.isTTY ? createLogger(level, 'rein', prettyDestination(err)) : createLogger(level, 'rein', err === process.stderr ? undefined : { write: (line: string) => void err.write(line) });
}

/** Resolves on the first SIGINT or SIGTERM, so a command can shut down in order. */
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
  // Loaded here, not with this module: every command imports this one, and the gateway or the policy server never talk to Temporal.
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
