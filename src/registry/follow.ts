import pg from 'pg';
import type { Logger } from '../log/logger.js';
import type { StoreLocation } from '../store/location.js';
import type { PolicyRegistry } from './policy-registry.js';
import { REGISTRY_CHANNEL } from './announce.js';
import { openRegistry } from './open.js';
import { restoreRoutes } from './serving.js';

export interface RegistryFollower {
  close(): Promise<void>;
}

const RECONNECT_MS = { first: 500, max: 15_000 };

/**
 * Keeps a gateway's routes where the registry says, when the registry is in PostgreSQL and so
 * shared by many gateways: every alias move and new version reaches each of them at once (LISTEN),
 * not only the one a promotion's admin call happened to land on. After every (re)connection it
 * re-reads the whole registry, since announcements made while it was away are not replayed.
 * With SQLite files (one host, one gateway) there is nothing to follow: the admin API suffices.
 */
export async function followRegistry(
  location: StoreLocation,
  router: Parameters<typeof restoreRoutes>[1],
  backend: string,
  logger: Logger,
): Promise<RegistryFollower> {
  const url = location.postgresUrl;
  if (url === null) return { close: async () => {} };
  const registry = await openRegistry(location);
  let closed = false;
  let listener: pg.Client | undefined;
  let reconnectTimer: NodeJS.Timeout | undefined;
  let delay = RECONNECT_MS.first;

  // One restore at a time; announcements that arrive meanwhile cause one more, not one each.
  let restoring: Promise<void> | undefined;
  let again = false;
  const restore = (): Promise<void> => {
    if (restoring) {
      again = true;
      return restoring;
    }
    restoring = (async () => {
      do {
        again = false;
        try {
          await applyRegistry(registry, router, backend, logger);
        } catch (err) {
          logger.warn({ err: (err as Error).message }, 'could not read the registry to update routes; retrying on the next change or reconnection');
        }
      } while (again && !closed);
    })().finally(() => {
      restoring = undefined;
    });
    return restoring;
  };

  const connect = async (): Promise<void> => {
    const client = new pg.Client({ connectionString: url, application_name: 'rein-registry-follower', keepAlive: true });
    // Until it listens, a failure is the caller's to handle (this handler only keeps pg from crashing the process).
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query(`LISTEN ${REGISTRY_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (closed) {
      // close() ran while this connected, so it had no connection to end: this one ends itself.
      await client.end().catch(() => undefined);
      return;
    }
    const lost = (err?: Error) => {
      if (listener !== client) return;
      listener = undefined;
      client.end().catch(() => undefined);
      if (closed) return;
      logger.warn({ err: err?.message, retryInMs: delay }, 'lost the connection that hears registry changes; reconnecting');
      scheduleReconnect();
    };
    client.removeAllListeners('error');
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (message) => {
      if (message.channel === REGISTRY_CHANNEL) void restore();
    });
    listener = client;
    delay = RECONNECT_MS.first;
    await restore();
  };
  const scheduleReconnect = () => {
    reconnectTimer = setTimeout(() => {
      connect().catch((err: unknown) => {
        if (closed) return;
        delay = Math.min(delay * 2, RECONNECT_MS.max);
        logger.warn({ err: (err as Error).message, retryInMs: delay }, 'cannot reach PostgreSQL to hear registry changes; retrying');
        scheduleReconnect();
      });
    }, delay);
  };

  try {
    await connect();
  } catch (err) {
    await registry.close();
    throw err;
  }
  return {
    close: async () => {
      closed = true;
      clearTimeout(reconnectTimer);
      const client = listener;
      listener = undefined;
      await client?.end().catch(() => undefined);
      await restoring;
      await registry.close();
    },
  };
}

async function applyRegistry(registry: PolicyRegistry, router: Parameters<typeof restoreRoutes>[1], backend: string, logger: Logger): Promise<void> {
  const { restored, skipped, skippedAliases } = await restoreRoutes(registry, router, backend);
  if (restored.length > 0) logger.info({ restored }, 'routing policy versions registered elsewhere');
  if (skipped.length > 0) logger.warn({ skipped }, 'registered policy versions this gateway cannot route');
  if (skippedAliases.length > 0) logger.warn({ skipped: skippedAliases }, 'aliases in the registry name versions this gateway does not serve');
}
