import type { Client } from '@temporalio/client';
import { artifactStoreFromConfig } from '../artifacts/from-config.js';
import type { ArtifactStore } from '../artifacts/artifact-store.js';
import type { IterationWorkflow } from '../client/iterations.js';
import type { RunOverrides } from '../client/runs.js';
import type { ReinConfig } from '../config/schema.js';
import type { GatewayControlClient } from '../gateway/control-client.js';
import { gatewayControlFromConfig } from '../gateway/from-config.js';
import type { LedgerStore } from '../ledger/ledger.js';
import { openLedger } from '../ledger/open.js';
import { createLogger } from '../log/logger.js';
import { notifyAliasMove } from '../notify/alias-move.js';
import { openRegistry } from '../registry/open.js';
import { openedOnFirstUse, type PolicyRegistry } from '../registry/policy-registry.js';
import type { AliasMove } from '../registry/promotion.js';
import { storeLocation } from '../store/location.js';
import { ApiError } from './errors.js';

export interface ApiOptions {
  config: ReinConfig;
  client: Client;
  /** SHA-256 (hex) of the key callers send as `Authorization: Bearer <key>`. */
  keyHash: string;
  /** The Temporal Web UI's address, when known (the console links each workflow there). */
  temporalUiUrl?: string;
}

/** What the routes share for the API's life: the config, Temporal, the stores, the gateway. */
export interface ApiContext {
  config: ReinConfig;
  client: Client;
  taskQueue: string;
  temporalUiUrl: string | undefined;
  /**
   * Iteration workflows already closed, remembered so that a run page refresh asks Temporal only about the open ones.
   */
  completedIterations: Map<string, IterationWorkflow>;
  registry<T>(use: (registry: PolicyRegistry) => T | Promise<T>): Promise<T>;
  ledger(): Promise<LedgerStore>;
  /** The gateway's control API, whose journal the console's rollouts are read from. */
  gateway(): GatewayControlClient;
  /** The artifact store the workers upload rollout logs to. */
  artifacts(): ArtifactStore;
  /** Tells the webhook of an alias move made here, after the answer: its retries must not hold the caller. */
  told(move: AliasMove): AliasMove;
  close(): Promise<void>;
}

export function apiContext(options: ApiOptions): ApiContext {
  const { config, client } = options;
  // One registry and one ledger for the API's life (on PostgreSQL, a connection pool each), opened when first asked
  // for.
  const registryStore = openedOnFirstUse(() => openRegistry(storeLocation(config)));
  const ledgerStore = openedOnFirstUse(() => openLedger(storeLocation(config)));
  let artifacts: ArtifactStore | undefined;
  let notifyLog: ReturnType<typeof createLogger> | undefined;
  return {
    config,
    client,
    taskQueue: config.temporal.taskQueue,
    temporalUiUrl: options.temporalUiUrl,
    completedIterations: new Map(),
    registry: async (use) => use(await registryStore.get()),
    ledger: () => ledgerStore.get(),
    gateway: () => {
      // With the admin key workers use; the gateway itself may know only its hash.
      const control = gatewayControlFromConfig(config.gateway);
      if (!control)
        throw new ApiError(
          503,
          'gateway_unavailable',
          'rollouts are read from the gateway, and no admin key for it can be read here: set REIN_GATEWAY_ADMIN_KEY (the gateway has only gateway.adminKeyHash)',
        );
      return control;
    },
    artifacts: () => (artifacts ??= artifactStoreFromConfig(config)),
    told: (move) => {
      void notifyAliasMove(config.notifications, move, (problem) =>
        (notifyLog ??= createLogger(config.log.level, 'api')).warn(problem),
      );
      return move;
    },
    close: async () => {
      await registryStore.close();
      await ledgerStore.close();
    },
  };
}

/** The run sizes a request may override, as the run's input takes them. */
export function runOverrides(body: RunOverrides): RunOverrides {
  return {
    iterations: body.iterations,
    tasksPerIteration: body.tasksPerIteration,
    samplesPerTask: body.samplesPerTask,
    heldoutLimit: body.heldoutLimit,
  };
}
