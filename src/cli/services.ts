import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { ReinConfig } from '../config/schema.js';
import { startApi, type ApiServer } from '../api/server.js';
import { adminKeyHash, gatewayOptions } from '../gateway/from-config.js';
import { startGateway, type Gateway } from '../gateway/server.js';
import type { Logger } from '../log/logger.js';
import { startPolicyServer, type PolicyServer } from '../policy/server.js';
import { PolicyRegistry } from '../registry/policy-registry.js';
import { SqliteTraceStore } from '../store/sqlite-store.js';
import { startLocalWorker, type RunningWorker } from './local-worker.js';
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
export async function startServices(config: ReinConfig, logger: Logger, options: { api?: boolean } = {}): Promise<RunningServices> {
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
      policyServer = await startPolicyServer({ host: config.policyServer.host, port: config.policyServer.port, models: { [base.version]: base.checkpoint as string } });
      const server = policyServer;
      closers.push(() => server.close());
      logger.info({ url: policyServer.url, base: base.version }, 'embedded policy server listening');
    }

    const store = new SqliteTraceStore(config.gateway.traceDb);
    closers.push(() => store.close());
    const gateway = await startGateway(gatewayOptions(config.gateway, store).options, { host: config.gateway.host, port: config.gateway.port });
    closers.push(() => gateway.close());
    logger.info({ url: gateway.url }, 'gateway listening');
    if (policyServer) restoreTrainedPolicies(config, policyServer, gateway, logger);

    const worker = await startLocalWorker(config, logger);
    closers.push(() => worker.stop());
    let api: ApiServer | undefined;
    if (options.api) {
      api = await startApi({ config, client: temporal.temporal.client, keyHash: adminKeyHash(config.gateway, process.env).hash }, config.api);
      const server = api;
      closers.push(() => server.close());
      logger.info({ url: api.url }, 'HTTP API listening');
    }
    const failed = Promise.race([
      worker.done.then(
        () => 'the worker stopped',
        (err: Error) => `the worker crashed: ${err.message}`,
      ),
      temporal.devServer?.exited.then((code) => `the Temporal dev server exited (code ${String(code)}); see ${temporal.devServer?.logFile}`) ?? new Promise<never>(() => {}),
    ]);
    return { temporal, policyServer, gateway, worker, api, failed, shutdown };
  } catch (err) {
    await shutdown();
    throw err;
  }
}

/** Serves the registry's trained versions again (the policy server and the gateway's routes live in memory). */
function restoreTrainedPolicies(config: ReinConfig, policyServer: PolicyServer, gateway: Gateway, logger: Logger): void {
  mkdirSync(config.dataDir, { recursive: true });
  const registry = new PolicyRegistry(path.join(config.dataDir, 'registry.sqlite'));
  try {
    const served = new Set(policyServer.models());
    const restored: string[] = [];
    for (const policy of registry.list()) {
      if (served.has(policy.version) || !existsSync(policy.checkpointUri)) continue;
      policyServer.load(policy.version, policy.checkpointUri);
      gateway.router.registerPolicy(policy.version, { backend: config.trainer.servingBackend, model: policy.version });
      restored.push(policy.version);
    }
    if (restored.length > 0) logger.info({ restored }, 'serving trained policy versions again');
  } finally {
    registry.close();
  }
}
