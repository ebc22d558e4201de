import type { Worker } from '@temporalio/worker';
import type { ReinConfig } from '../config/schema.js';
import type { Logger } from '../log/logger.js';
import { startMetricsServer, type MetricsServer } from '../metrics/metrics-server.js';
import { WorkerMetrics } from '../metrics/worker-metrics.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import { connectWorker, createReinWorker } from '../../workers/worker.js';

export interface RunningWorker {
  worker: Worker;
  /** The worker's /metrics address, when worker.metricsPort is set. */
  metricsUrl?: string;
  /** Resolves when the worker has stopped; rejects if it crashed. */
  done: Promise<void>;
  stop(): Promise<void>;
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
  const done = worker.run().finally(async () => {
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
