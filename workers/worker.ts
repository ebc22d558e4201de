import { NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities/index.js';
import type { TemporalSettings } from '../src/config/schema.js';
import { temporalConnectionOptions } from '../src/config/temporal-connection.js';
import type { WorkerMetrics } from '../src/metrics/worker-metrics.js';
import { metricsInterceptor } from './metrics.js';
import { workflowSource } from './workflow-bundle.js';

export interface ReinWorkerOptions extends ActivityDeps {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  /**
   * A bundle of the workflows (tests build one and share it); default: the one `npm run build` wrote, else workflows/
   * bundled at start.
   */
  workflowBundle?: WorkflowBundleOption;
  /** Where each activity is timed and its outcomes counted, for /metrics. */
  metrics?: WorkerMetrics;
  /** worker.maxConcurrentActivities: so several workers share a set's shards. */
  maxConcurrentActivities?: number;
}

/** The worker that runs Rein's workflows and activities on one task queue. */
export async function createReinWorker(options: ReinWorkerOptions): Promise<Worker> {
  const { connection, namespace, taskQueue, workflowBundle, metrics, maxConcurrentActivities, ...deps } = options;
  return Worker.create({
    connection,
    namespace,
    taskQueue,
    activities: createActivities(deps),
    ...(metrics && { interceptors: { activity: [metricsInterceptor(metrics, deps.registry)] } }),
    // Heartbeats carry stage progress (rollouts done of total) that `rein train --follow` and the
    // Web UI show; the SDK's default throttle would hold it back for up to a minute.
    maxHeartbeatThrottleInterval: '1 second',
    defaultHeartbeatThrottleInterval: '1 second',
    ...(maxConcurrentActivities !== undefined && { maxConcurrentActivityTaskExecutions: maxConcurrentActivities }),
    ...(workflowBundle ? { workflowBundle } : workflowSource()),
  });
}

export async function connectWorker(settings: TemporalSettings): Promise<NativeConnection> {
  const options = temporalConnectionOptions(settings);
  try {
    return await NativeConnection.connect(options);
  } catch (err) {
    throw new Error(`worker cannot reach Temporal at ${options.address}: ${(err as Error).message}`);
  }
}
