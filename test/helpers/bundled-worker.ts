/**
 * A Rein worker process, as `rein worker` runs one (createReinWorker), but on a workflow bundle built once by the
 * test setup: a test that starts several workers (and kills some) does not pay for bundling the
 * workflows in each. Usage: node --import tsx test/helpers/bundled-worker.ts CONFIG BUNDLE.cjs;
 * prints "worker polling" once it polls.
 */
import { loadConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../../activities/index.js';
import { connectWorker } from '../../workers/worker.js';

const [configFile, bundlePath] = process.argv.slice(2);
if (!configFile || !bundlePath) throw new Error('bundled-worker: give the config file and the workflow bundle file');
const { config } = loadConfig({ file: configFile });
installTemporalRuntime(createLogger('warn'));
const connection = await connectWorker(config.temporal);
const activities = await activityDepsFromConfig(config);
// As createReinWorker makes it, but a workflow task sent to this worker's cache once it is killed
// goes back to the shared queue after 1 s, not Temporal's default 10 s.
const worker = await Worker.create({
  connection,
  namespace: config.temporal.namespace,
  taskQueue: config.temporal.taskQueue,
  activities: createActivities(activities.deps),
  maxHeartbeatThrottleInterval: '1 second',
  defaultHeartbeatThrottleInterval: '1 second',
  stickyQueueScheduleToStartTimeout: '1 second',
  workflowBundle: { codePath: bundlePath },
});
process.once('SIGTERM', () => worker.shutdown());
const done = worker.run();
console.log(`worker polling ${config.temporal.taskQueue}`);
await done;
await connection.close();
await activities.close();
