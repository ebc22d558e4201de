import type { ReinConfig } from '../config/schema.js';
import { usesEmbeddedServer } from '../config/temporal-connection.js';
import { connectTemporal, ensureSearchAttributes, type TemporalClient } from '../client/temporal.js';
import { startDevServer, type DevServer } from '../devserver/dev-server.js';
import { findTemporalCli } from '../devserver/temporal-cli.js';
import type { Logger } from '../log/logger.js';
import { temporalUiUrl } from './context.js';

export interface TemporalUp {
  temporal: TemporalClient;
  /** The embedded dev server Rein started, or undefined when TEMPORAL_ADDRESS points elsewhere. */
  devServer: DevServer | undefined;
  /** Web UI address, when known. */
  uiUrl: string | undefined;
  shutdown(): Promise<void>;
}

/**
 * Starts the embedded dev server unless an external address is configured (or, with
 * `reuseRunning`, the dev server is already up from another `rein` command), connects, and
 * registers Rein's search attributes.
 */
export async function bringUpTemporal(
  config: ReinConfig,
  logger: Logger,
  options: { reuseRunning?: boolean } = {},
): Promise<TemporalUp> {
  const settings = config.temporal;
  let devServer: DevServer | undefined;
  const running =
    options.reuseRunning && usesEmbeddedServer(settings)
      ? await connectTemporal(settings, 1500).catch(() => undefined)
      : undefined;
  if (running) {
    await running.close();
    logger.info(
      { address: `${settings.devServer.ip}:${settings.devServer.port}` },
      'the Temporal dev server is already running',
    );
  } else if (usesEmbeddedServer(settings)) {
    const cliPath = findTemporalCli();
    logger.info({ cliPath, dbFile: settings.devServer.dbFile }, 'starting the Temporal dev server');
    devServer = await startDevServer({ ...settings.devServer, cliPath, namespaces: [settings.namespace] });
  } else {
    logger.info({ address: settings.address, namespace: settings.namespace }, 'using an existing Temporal server');
  }
  try {
    const temporal = await connectTemporal(settings);
    const { created } = await ensureSearchAttributes(temporal.connection, settings.namespace);
    if (created.length > 0) logger.info({ created }, 'registered search attributes');
    return {
      temporal,
      devServer,
      uiUrl: devServer?.uiUrl ?? (running ? temporalUiUrl(config) : undefined),
      async shutdown() {
        await temporal.close();
        await devServer?.stop();
      },
    };
  } catch (err) {
    await devServer?.stop();
    throw err;
  }
}
