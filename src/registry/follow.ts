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
  const listener = new RegistryListener(url, () => applyRegistry(registry, router, backend, logger), logger);
  try {
    await listener.connect();
  } catch (err) {
    await registry.close();
    throw err;
  }
  return {
    close: async () => {
      await listener.close();
      await registry.close();
    },
  };
}

/**
 * The PostgreSQL connection that hears registry changes (LISTEN), reconnecting with a growing
 * delay when it is lost, and the restores of the routes that each change and each (re)connection
 * cause.
 */
class RegistryListener {
  private closed = false;
  /** The connection that listens now; none while connecting or reconnecting. */
  private connection: pg.Client | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private delay = RECONNECT_MS.first;
  // One restore at a time; announcements that arrive meanwhile cause one more, not one each.
  private restoring: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly url: string,
    private readonly apply: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.url,
      application_name: 'rein-registry-follower',
      keepAlive: true,
    });
    // Until it listens, a failure is the caller's to handle (this handler only keeps pg from crashing the process).
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query(`LISTEN ${REGISTRY_CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      // close() ran while this connected, so it had no connection to end: this one ends itself.
      await client.end().catch(() => undefined);
      return;
    }
    client.removeAllListeners('error');
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client));
    client.on('notification', (message) => {
      if (message.channel === REGISTRY_CHANNEL) void this.restore();
    });
    this.connection = client;
    this.delay = RECONNECT_MS.first;
    await this.restore();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const client = this.connection;
    this.connection = undefined;
    await client?.end().catch(() => undefined);
    await this.restoring;
  }

  private lost(client: pg.Client, err?: Error): void {
    if (this.connection !== client) return;
    this.connection = undefined;
    client.end().catch(() => undefined);
    if (this.closed) return;
    this.logger.warn(
      { err: err?.message, retryInMs: this.delay },
      'lost the connection that hears registry changes; reconnecting',
    );
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.reconnectTimer = setTimeout(() => {
      this.connect().catch((err: unknown) => {
        if (this.closed) return;
        this.delay = Math.min(this.delay * 2, RECONNECT_MS.max);
        this.logger.warn(
          { err: (err as Error).message, retryInMs: this.delay },
          'cannot reach PostgreSQL to hear registry changes; retrying',
        );
        this.scheduleReconnect();
      });
    }, this.delay);
  }

  private restore(): Promise<void> {
    if (this.restoring) {
      this.again = true;
      return this.restoring;
    }
    this.restoring = (async () => {
      do {
        this.again = false;
        try {
          await this.apply();
        } catch (err) {
          this.logger.warn(
            { err: (err as Error).message },
            'could not read the registry to update routes; retrying on the next change or reconnection',
          );
        }
      } while (this.again && !this.closed);
    })().finally(() => {
      this.restoring = undefined;
    });
    return this.restoring;
  }
}

async function applyRegistry(
  registry: PolicyRegistry,
  router: Parameters<typeof restoreRoutes>[1],
  backend: string,
  logger: Logger,
): Promise<void> {
  const { restored, skipped, skippedAliases } = await restoreRoutes(registry, router, backend);
  if (restored.length > 0) logger.info({ restored }, 'routing policy versions registered elsewhere');
  if (skipped.length > 0) logger.warn({ skipped }, 'registered policy versions this gateway cannot route');
  if (skippedAliases.length > 0)
    logger.warn({ skipped: skippedAliases }, 'aliases in the registry name versions this gateway does not serve');
}
