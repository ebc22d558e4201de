import type { Worker } from '@temporalio/worker';
import type { ReinConfig } from '../config/schema.js';
import type { Logger } from '../log/logger.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import { connectWorker, createReinWorker } from '../../workers/worker.js';

export interface RunningWorker {
  worker: Worker;
  /** Resolves when the worker has stopped; rejects if it crashed. */
  done: Promise<void>;
  stop(): Promise<void>;
}

/** Starts a Rein worker inside this process (what `rein dev` and `rein doctor` use). */
export async function startLocalWorker(config: ReinConfig, logger: Logger): Promise<RunningWorker> {
  installTemporalRuntime(logger);
  const connection = await connectWorker(config.temporal);
  const activities = activityDepsFromConfig(config);
  const worker = await createReinWorker({
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    ...activities.deps,
  });
  const done = worker.run().finally(async () => {
    await connection.close();
    await activities.close();
  });
  logger.info({ taskQueue: config.temporal.taskQueue }, 'worker polling');
  return {
    worker,
    done,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await done;
    },
  };
}
