import type { Worker } from '@temporalio/worker';
import type { ReinConfig } from '../config/schema.js';
import type { Logger } from '../log/logger.js';
import { startMetricsServer, type MetricsServer } from '../metrics/metrics-server.js';
import { WorkerMetrics } from '../metrics/worker-metrics.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import type { ActivityDeps } from '../../activities/index.js';
import { keepServing, reconcileServing } from '../registry/serving-reconciler.js';
import { connectWorker, createReinWorker } from '../../workers/worker.js';

export interface RunningWorker {
  worker: Worker;
  /** The worker's /metrics address, when worker.metricsPort is set. */
  metricsUrl?: string;
  /** Resolves when the worker has stopped; rejects if it crashed. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * The serving reconciler, where this worker serves trained versions: what the aliases point at is loaded again on a
 * backend that restarted, within seconds (registry/serving-reconciler.ts).
 */
function keepServingFor(deps: ActivityDeps, logger: Logger, metrics: WorkerMetrics | undefined) {
  const { registry, gateway, serving } = deps;
  if (!registry || !gateway || !serving) return undefined;
  return keepServing(
    () => reconcileServing(registry, gateway, serving),
    (state) => {
      metrics?.servingReconciled(state);
      for (const l of state.loaded) logger.info({ version: l.version, endpoints: l.endpoints }, 'served again');
      for (const f of state.failed) logger.warn({ version: f.version }, `not served: ${f.reason}`);
    },
    (err) => logger.warn(`serving reconciler: ${err.message}`),
  );
}

/** Starts a Rein worker inside this process (what `rein dev` and `rein doctor` use). */
export async function startLocalWorker(
  config: ReinConfig,
  logger: Logger,
  options: { serveMetrics?: boolean } = {},
): Promise<RunningWorker> {
  installTemporalRuntime(logger);
  const connection = await connectWorker(config.temporal);
  const activities = await activityDepsFromConfig(config);
  // A short-lived worker (`rein doctor`'s) leaves worker.metricsPort to the long-running one.
  const metrics =
    config.worker.metricsPort === undefined || options.serveMetrics === false ? undefined : new WorkerMetrics();
  let metricsServer: MetricsServer | undefined;
  let worker: Worker;
  try {
    // Bound first: a port in use stops the worker before it takes any task.
    if (metrics && config.worker.metricsPort !== undefined) {
      metricsServer = await startMetricsServer(
        metrics.registry,
        { host: config.worker.metricsHost, port: config.worker.metricsPort },
        'the worker',
        'worker.metricsPort',
      );
    }
    worker = await createReinWorker({
      connection,
      namespace: config.temporal.namespace,
      taskQueue: config.temporal.taskQueue,
      ...activities.deps,
      ...(metrics && { metrics }),
      ...(config.worker.maxConcurrentActivities !== undefined && {
        maxConcurrentActivities: config.worker.maxConcurrentActivities,
      }),
    });
  } catch (err) {
    await metricsServer?.close();
    await connection.close();
    await activities.close();
    throw err;
  }
  // A short-lived worker (`rein doctor`'s) leaves serving to the long-running ones too.
  const serving = options.serveMetrics === false ? undefined : keepServingFor(activities.deps, logger, metrics);
  const done = worker.run().finally(async () => {
    await serving?.stop();
    await metricsServer?.close();
    await connection.close();
    await activities.close();
  });
  logger.info(
    { taskQueue: config.temporal.taskQueue, ...(metricsServer && { metrics: metricsServer.url }) },
    'worker polling',
  );
  return {
    worker,
    ...(metricsServer && { metricsUrl: metricsServer.url }),
    done,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
