import path from 'node:path';
import type { ActivityDeps } from '../activities/index.js';
import { artifactStoreFromConfig, stagingDir } from '../src/artifacts/from-config.js';
import { EMBEDDED_BACKEND } from '../src/config/embedded-default.js';
import { runConfigOf } from '../src/config/run-config.js';
import type { ReinConfig } from '../src/config/schema.js';
import { gatewayControlFromConfig } from '../src/gateway/from-config.js';
import { redactionRules } from '../src/gateway/redact.js';
import { openLedger } from '../src/ledger/open.js';
import { policyServerKey } from '../src/policy/admin-key.js';
import { megabytes } from '../src/preflight/disk-space.js';
import { openRegistry } from '../src/registry/open.js';
import type { WeightSyncKind } from '../src/registry/weight-sync.js';
import { EnvironmentServer } from '../src/environments/server.js';
import { ProcessLauncher } from '../src/rollouts/launcher.js';
import { storeLocation } from '../src/store/location.js';
import { traceStoreFromConfig } from '../src/store/open.js';
import { policyTrainer } from '../src/training/policy-update.js';
import { stagedPolicyTrainer } from '../src/training/staged-trainer.js';
import { storedRunDeps } from './run-configs.js';

/** What belongs to the worker, whatever run it works for: stores, the gateway, the trainer, serving. */
export type WorkerDeps = Omit<ActivityDeps, 'runs'>;

/**
 * The key for loading versions into the serving backend: the embedded policy server's admin key,
 * else the backend's API key (vLLM guards /v1/load_lora_adapter with its --api-key).
 */
function servingKey(config: ReinConfig): string | undefined {
  const { servingBackend } = config.trainer;
  if (servingBackend === EMBEDDED_BACKEND && config.policyServer.enabled) return policyServerKey(config.dataDir);
  const keyEnv = config.gateway.backends[servingBackend]?.apiKeyEnv;
  return keyEnv ? process.env[keyEnv] : undefined;
}

/** The notification settings, with links to the embedded dev server's Web UI when Rein runs it and none was set. */
export function notificationsFromConfig(config: ReinConfig): ReinConfig['notifications'] {
  const { temporal, notifications } = config;
  if (notifications.temporalUiUrl || temporal.address || temporal.devServer.headless) return notifications;
  return { ...notifications, temporalUiUrl: `http://${temporal.devServer.ip}:${temporal.devServer.uiPort}` };
}

/**
 * The activities' dependencies for a worker, from its config: the worker's own (stores, gateway,
 * trainer), and each run's harness, verifier, sample and gate settings from the run's own config,
 * which the client stored in the artifact store under the hash the run's workflows carry.
 */
export async function activityDepsFromConfig(
  config: ReinConfig,
): Promise<{ deps: ActivityDeps; close(): Promise<void> }> {
  const worker = await workerDepsFromConfig(config);
  const runs = storedRunDeps({ artifacts: worker.deps.artifacts, pacing: config.rollouts, own: runConfigOf(config) });
  return { deps: { ...worker.deps, runs }, close: worker.close };
}

/** How the serving backend takes new versions: as configured, else rein for the embedded backend, vllm for others. */
function weightSyncOf(config: ReinConfig): WeightSyncKind {
  const { servingBackend } = config.trainer;
  return config.gateway.backends[servingBackend]?.weightSync ?? (servingBackend === EMBEDDED_BACKEND ? 'rein' : 'vllm');
}

/** The worker-level dependencies: the trace store, registry, ledger, artifacts, gateway, trainer, serving. */
export async function workerDepsFromConfig(config: ReinConfig): Promise<{ deps: WorkerDeps; close(): Promise<void> }> {
  // Where store.url says: PostgreSQL shared with the CLI, the API and other workers, or the data directory's SQLite
  // file.
  const registry = await openRegistry(storeLocation(config));
  const ledger = await openLedger(storeLocation(config)).catch(async (err: unknown) => {
    await registry.close();
    throw err;
  });
  const store = await traceStoreFromConfig(config).catch(async (err: unknown) => {
    await registry.close();
    await ledger.close();
    throw err;
  });
  const gateway = gatewayControlFromConfig(config.gateway);
  const artifacts = artifactStoreFromConfig(config);
  const servingEndpoints = config.gateway.backends[config.trainer.servingBackend]?.endpoints;
  // Harnesses and verifiers are spawned from a small child process: fork from the worker costs ~10× more.
  const launcher = new ProcessLauncher();
  let environments: Promise<EnvironmentServer> | undefined;
  const deps: WorkerDeps = {
    commands: launcher.run,
    environmentServer: () => (environments ??= EnvironmentServer.start()),
    ...(gateway && { gateway }),
    dataDir: config.dataDir,
    minFreeBytes: megabytes(config.storage.minFreeMegabytes),
    store,
    artifacts,
    // Rollout logs are uploaded redacted as the gateway redacts what it journals.
    redaction: redactionRules(config.gateway.redact.rules, config.gateway.redact.defaults),
    registry,
    ledger,
    notifications: notificationsFromConfig(config),
    // s3:// batches and checkpoints are staged for the trainer, its output uploaded (src/training/staged-trainer.ts).
    trainer: stagedPolicyTrainer(policyTrainer(config.trainer, path.join(config.dataDir, 'logs'), config.artifacts), {
      artifacts,
      stagingDir: stagingDir(config.dataDir),
      policiesDir: path.join(config.dataDir, 'policies'),
    }),
    policiesDir: path.join(config.dataDir, 'policies'),
    ...(servingEndpoints && {
      serving: {
        backend: config.trainer.servingBackend,
        endpoints: servingEndpoints,
        weightSync: weightSyncOf(config),
        apiKey: () => servingKey(config),
      },
    }),
  };
  return {
    deps,
    close: async () => {
      await launcher.close();
      await environments?.then(
        (server) => server.close(),
        () => undefined,
      );
      await registry.close();
      await ledger.close();
      await store.close();
    },
  };
}
