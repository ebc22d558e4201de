import { loadConfig, type LoadedConfig } from '../config/load.js';
import type { ReinConfig } from '../config/schema.js';
import { createLogger, type Logger } from '../log/logger.js';

export interface GlobalOptions {
  config?: string;
}

export interface CliContext extends LoadedConfig {
  logger: Logger;
}

export function cliContext(options: GlobalOptions): CliContext {
  const loaded = loadConfig({ file: options.config });
  return { ...loaded, logger: createLogger(loaded.config.log.level) };
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

/** The Web UI of the embedded dev server, when Rein runs one with a UI. */
export function temporalUiUrl(config: ReinConfig): string | undefined {
  const { address, devServer } = config.temporal;
  return address || devServer.headless ? undefined : `http://${devServer.ip}:${devServer.uiPort}`;
}

export function workflowUrl(uiUrl: string, namespace: string, workflowId: string, runId: string): string {
  return `${uiUrl}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/${runId}/history`;
}
