import { existsSync } from 'node:fs';
import { isLocalReference } from '../artifacts/folders.js';
import { artifactStoreFromConfig, stagingDir } from '../artifacts/from-config.js';
import type { ReinConfig } from '../config/schema.js';
import { startApi, type ApiServer } from '../api/server.js';
import { adminKeyHash, gatewayOptions } from '../gateway/from-config.js';
import { startGateway, type Gateway } from '../gateway/server.js';
import { followRegistry } from '../registry/follow.js';
import type { Logger } from '../log/logger.js';
import { policyServerKey } from '../policy/admin-key.js';
import { startPolicyServer, type PolicyServer } from '../policy/server.js';
import { withRegistry } from '../registry/open.js';
import { storeLocation } from '../store/location.js';
import { restoreRoutes, trainedVersions } from '../registry/serving.js';
import { gatewayInstanceName, traceStoreFromConfig } from '../store/open.js';
import { startLocalWorker, type RunningWorker } from './local-worker.js';
import { listenAs } from './port-in-use.js';
import { bringUpTemporal, type TemporalUp } from './temporal-up.js';

export interface RunningServices {
  temporal: TemporalUp;
  /** The embedded policy server, when the config uses the embedded default. */
  policyServer: PolicyServer | undefined;
  gateway: Gateway;
  worker: RunningWorker;
  /** The HTTP API, when asked for. */
  api: ApiServer | undefined;
  /** Resolves with a reason when a service stops on its own (the caller should shut down). */
  failed: Promise<string>;
  shutdown(): Promise<void>;
}

/**
 * Everything the embedded default needs, in this process: Temporal (the dev server unless an
 * address is configured), the embedded policy server, the gateway, and a worker. Policy versions
 * trained earlier are served again, so a run resumed after a restart finds its policy.
 */
export async function startServices(
  config: ReinConfig,
  logger: Logger,
  options: { api?: boolean } = {},
): Promise<RunningServices> {
  const closers: Array<() => Promise<void> | void> = [];
  const shutdown = async () => {
    for (const close of closers.splice(0).reverse()) await close();
  };
  try {
    const temporal = await bringUpTemporal(config, logger, { reuseRunning: true });
    closers.push(() => temporal.shutdown());

    let policyServer: PolicyServer | undefined;
    if (config.policyServer.enabled) {
      const { base } = config.run;
      policyServer = await listenAs('embedded policy server', 'policyServer.port', config.policyServer, () =>
        startPolicyServer({
          host: config.policyServer.host,
          port: config.policyServer.port,
          models: { [base.version]: base.checkpoint as string },
          // Workers load the versions they train with it (activity deps read the same key).
          adminKey: policyServerKey(config.dataDir),
          artifacts: { store: artifactStoreFromConfig(config), stagingDir: stagingDir(config.dataDir) },
        }),
      );
      const server = policyServer;
      closers.push(() => server.close());
      logger.info({ url: policyServer.url, base: base.version }, 'embedded policy server listening');
    }

    const store = await traceStoreFromConfig(config, { gateway: gatewayInstanceName(config.gateway) });
    closers.push(() => store.close());
    const gateway = await listenAs('gateway', 'gateway.port', config.gateway, () =>
      startGateway(gatewayOptions(config.gateway, store).options, {
        host: config.gateway.host,
        port: config.gateway.port,
      }),
    );
    closers.push(() => gateway.close());
    logger.info({ url: gateway.url }, 'gateway listening');
    await restoreRegistryRoutes(config, policyServer, gateway, logger);
    // With the registry in PostgreSQL, promotions made anywhere reach this gateway too.
    const follower = await followRegistry(storeLocation(config), gateway.router, config.trainer.servingBackend, logger);
    closers.push(() => follower.close());

    const worker = await startLocalWorker(config, logger);
    closers.push(() => worker.stop());
    let api: ApiServer | undefined;
    if (options.api) {
      api = await listenAs('HTTP API', 'api.port', config.api, () =>
        startApi(
          {
            config,
            client: temporal.temporal.client,
            keyHash: adminKeyHash(config.gateway, process.env).hash,
            ...(temporal.uiUrl && { temporalUiUrl: temporal.uiUrl }),
          },
          config.api,
        ),
      );
      const server = api;
      closers.push(() => server.close());
      logger.info({ url: api.url }, 'HTTP API listening');
    }
    const failed = Promise.race([
      worker.done.then(
        () => 'the worker stopped',
        (err: Error) => `the worker crashed: ${err.message}`,
      ),
      temporal.devServer?.exited.then(
        (code) => `the Temporal dev server exited (code ${String(code)}); see ${temporal.devServer?.logFile}`,
      ) ?? new Promise<never>(() => {}),
    ]);
    return { temporal, policyServer, gateway, worker, api, failed, shutdown };
  } catch (err) {
    await shutdown();
    throw err;
  }
}

/**
 * Serves the registry's trained versions again and points aliases where the registry says (the
 * policy server and the gateway's routes live in memory).
 */
async function restoreRegistryRoutes(
  config: ReinConfig,
  policyServer: PolicyServer | undefined,
  gateway: Gateway,
  logger: Logger,
): Promise<void> {
  await withRegistry(storeLocation(config), async (registry) => {
    if (policyServer) {
      const served = new Set(policyServer.models());
      const loaded = (await trainedVersions(registry)).filter(
        (p) => !served.has(p.version) && (!isLocalReference(p.checkpointUri) || existsSync(p.checkpointUri)),
      );
      for (const policy of loaded) await policyServer.loadFrom(policy.version, policy.checkpointUri);
      if (loaded.length > 0)
        logger.info({ loaded: loaded.map((p) => p.version) }, 'serving trained policy versions again');
    }
    const { skipped, skippedAliases } = await restoreRoutes(registry, gateway.router, config.trainer.servingBackend);
    if (skipped.length > 0) logger.warn({ skipped }, 'trained policy versions this gateway cannot route');
    if (skippedAliases.length > 0)
      logger.warn({ skipped: skippedAliases }, 'aliases in the registry name versions this gateway does not serve');
  });
}
