import type { Client } from '@temporalio/client';
import { workerIsPolling } from '../client/runs.js';
import { connectTemporal, type TemporalClient } from '../client/temporal.js';
import type { ReinConfig } from '../config/schema.js';
import { usesEmbeddedServer } from '../config/temporal-connection.js';
import type { Logger } from '../log/logger.js';
import type { RunningServices } from './services.js';

/**
 * A Temporal client with a worker behind it: the configured server when a Rein worker polls its
 * task queue, else everything started in this process (for as long as the caller needs it).
 */
export async function connectOrStartServices(
  config: ReinConfig,
  logger: Logger,
  say: (line: string) => void,
): Promise<{ client: Client; services: RunningServices | undefined; close(): Promise<void> }> {
  const { taskQueue } = config.temporal;
  let temporal: TemporalClient | undefined = await connectTemporal(config.temporal, 1500).catch(() => undefined);
  // throws, saying how to fix it
  if (!temporal && !usesEmbeddedServer(config.temporal)) temporal = await connectTemporal(config.temporal);
  if (temporal && (await workerIsPolling(temporal.client, taskQueue))) {
    const connected = temporal;
    return { client: connected.client, services: undefined, close: () => connected.close() };
  }
  await temporal?.close();
  say(
    `No Rein worker polls task queue "${taskQueue}": running ${usesEmbeddedServer(config.temporal) ? 'Temporal, ' : ''}the gateway${config.policyServer.enabled ? ', the policy server' : ''} and a worker in this process until it is done (\`rein dev\` keeps them up).`,
  );
  // The services' modules (the gateway, the policy server, the worker) load only when they start.
  const { startServices } = await import('./services.js');
  const services = await startServices(config, logger);
  return { client: services.temporal.temporal.client, services, close: () => services.shutdown() };
}
