/**
 * Orchestration overhead per training iteration: the run's wall time not spent inside its
 * activities (rollouts, batch, training, registering), from the workflows' own histories. The
 * baseline, measured in the same run, is the time spent inside the activities. A small run
 * (the example agent on the embedded default, no held-out replay) keeps the work short so the
 * overhead shows.
 *
 *   npm run bench:loop [-- --iterations 5 --tasks 4 --samples 2]
 */
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import { embeddedTrainingRun } from './embedded-run.js';
import { activityIntervals, workflowWallSeconds } from './stage-times.js';

const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: '5' },
    tasks: { type: 'string', default: '4' },
    samples: { type: 'string', default: '2' },
  },
});
const iterations = Number(values.iterations);
const run = await embeddedTrainingRun({
  iterations,
  tasks: Number(values.tasks),
  samples: Number(values.samples),
  heldout: false,
  keepZeroVarianceGroups: true,
});

/** A workflow's wall time and the time its activities spent executing, by activity type. */
async function timings(client: Client, workflowId: string) {
  const inActivities: Record<string, number> = {};
  for (const { activity, start, end } of await activityIntervals(client, workflowId))
    inActivities[activity] = (inActivities[activity] ?? 0) + end - start;
  return { wall: await workflowWallSeconds(client, workflowId), inActivities };
}

const total = await timings(run.client, run.runId);
const perIteration = [];
const activities: Record<string, number> = { ...total.inActivities };
for (let i = 1; i <= iterations; i++) {
  const it = await timings(run.client, `${run.runId}-it${i}`);
  const inside = Object.values(it.inActivities).reduce((a, b) => a + b, 0);
  perIteration.push({
    iteration: i,
    wallSeconds: it.wall,
    inActivitiesSeconds: inside,
    overheadSeconds: it.wall - inside,
    activities: it.inActivities,
  });
  for (const [name, s] of Object.entries(it.inActivities)) activities[name] = (activities[name] ?? 0) + s;
}
const inside = Object.values(activities).reduce((a, b) => a + b, 0);
console.log(
  JSON.stringify(
    {
      iterations,
      runWallSeconds: total.wall,
      inActivitiesSeconds: inside,
      activitySeconds: activities,
      overheadPerIterationSeconds: (total.wall - inside) / iterations,
      overheadShareOfWall: (total.wall - inside) / total.wall,
      perIteration,
    },
    null,
    2,
  ),
);
await run.close();
