import { readFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { inject } from 'vitest';
import { startApi, type ApiServer } from '../../src/api/server.js';
import type { ReinConfig } from '../../src/config/schema.js';
import { adminKeyFile, gatewayOptions } from '../../src/gateway/from-config.js';
import { sha256Hex } from '../../src/gateway/keys.js';
import { startGateway } from '../../src/gateway/server.js';
import { createLogger } from '../../src/log/logger.js';
import { policyServerKey } from '../../src/policy/admin-key.js';
import { startPolicyServer } from '../../src/policy/server.js';
import { traceStoreFromConfig } from '../../src/store/open.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { createReinWorker } from '../../workers/worker.js';
import { testClient } from './temporal.js';

export interface ApiStack {
  api: ApiServer;
  client: Client;
  /** The gateway's admin key, which the API takes too. */
  key: string;
  close(): Promise<void>;
}

/**
 * What `rein dev` runs, in this process, for one config: the embedded policy server with the base
 * policy, the gateway, a Rein worker on the config's task queue and namespace (on the shared test
 * dev server) and the HTTP API.
 */
export async function startApiStack(
  config: ReinConfig,
  apiOptions: { temporalUiUrl?: string } = {},
): Promise<ApiStack> {
  const closers: Array<() => Promise<unknown> | unknown> = [];
  try {
    const policyServer = await startPolicyServer({
      host: '127.0.0.1',
      port: config.policyServer.port,
      models: { v0: config.run.base.checkpoint as string },
      adminKey: policyServerKey(config.dataDir),
    });
    closers.push(() => policyServer.close());
    const store = await traceStoreFromConfig(config);
    closers.push(() => store.close());
    const gateway = await startGateway(gatewayOptions(config.gateway, store, {}).options, {
      host: '127.0.0.1',
      port: config.gateway.port,
    });
    closers.push(() => gateway.close());
    const key = readFileSync(adminKeyFile(config.gateway), 'utf8').trim();

    installTemporalRuntime(createLogger('warn'));
    const nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
    const activities = await activityDepsFromConfig(config);
    const worker = await createReinWorker({
      connection: nativeConnection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      workflowBundle: { code: inject('workflowBundleCode') },
      ...activities.deps,
    });
    const running = worker.run();
    closers.push(async () => {
      worker.shutdown();
      await running;
      await nativeConnection.close();
      await activities.close();
    });
    const { client, connection } = await testClient(config.temporal.namespace);
    closers.push(() => connection.close());
    const api = await startApi(
      { config, client, keyHash: sha256Hex(key), ...apiOptions },
      { host: '127.0.0.1', port: 0 },
    );
    closers.push(() => api.close());
    const close = async () => {
      for (const closeOne of closers.reverse()) await closeOne();
    };
    return { api, client, key, close };
  } catch (err) {
    for (const closeOne of closers.reverse()) await closeOne();
    throw err;
  }
}
