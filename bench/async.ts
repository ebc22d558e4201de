/**
 * The asynchronous schedule against the synchronous one, side by side in one command: the example
 * run on the embedded default twice, same seed, same rollout budget (iterations × tasks ×
 * samples), same sample settings (samples.maxVersionsBehind 1, importanceWeightCap 2), only
 * run.schedule differs. Reports the end-to-end wall-time ratio (sync / async), each stage's busy
 * and idle time from the workflows' histories, and the held-out gain of what production serves at
 * the end over the base, with a 95% interval, for both.
 *
 *   npm run bench:async [-- --iterations 3 --tasks 16 --samples 8 --heldout 64 --seed 1]
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { pairedBootstrap } from '../src/gate/paired-tests.js';
import type { RunStatus } from '../workflows/index.js';
import { embeddedTrainingRun } from './embedded-run.js';
import { stageTimes } from './stage-times.js';

const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: '3' },
    tasks: { type: 'string', default: '16' },
    samples: { type: 'string', default: '8' },
    heldout: { type: 'string', default: '64' },
    concurrency: { type: 'string' },
    seed: { type: 'string', default: '1' },
  },
});

/**
 * The held-out gain after − before in success (reward > 0) per task, in points, with the interval
 * the release gate computes (its paired bootstrap, at gate.confidence's and gate.resamples' defaults).
 */
function pairedGain(before: Record<string, number>, after: Record<string, number>) {
  const success = (reward: number | undefined) => ((reward ?? 0) > 0 ? 1 : 0);
  const pairs = Object.keys(before).map((task) => ({
    task,
    incumbent: success(before[task]),
    candidate: success(after[task]),
  }));
  const { gain, lower, upper } = pairedBootstrap(pairs, { resamples: 2000, confidence: 0.95, seed: 1 });
  const points = (x: number) => Math.round(1000 * x) / 10;
  return { points: points(gain), interval95: [points(lower), points(upper)], tasks: pairs.length };
}

/** The host's CPU time, busy and in all, from /proc/stat (Linux): what share of the cores a run kept busy. */
function hostCpu(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

async function measured(schedule: 'sync' | 'async') {
  const cpuBefore = hostCpu();
  const run = await embeddedTrainingRun({
    iterations: Number(values.iterations),
    tasks: Number(values.tasks),
    samples: Number(values.samples),
    heldoutLimit: Number(values.heldout),
    concurrency: values.concurrency === undefined ? undefined : Number(values.concurrency),
    agentSeed: values.seed,
    schedule,
    maxVersionsBehind: 1,
    importanceWeightCap: 2,
  });
  const cpuAfter = hostCpu();
  try {
    const status = run.report.status as RunStatus;
    const base = status.heldout?.base;
    const production = status.heldout?.production ?? status.heldout?.latest;
    if (!base || !production) throw new Error(`the ${schedule} run replayed no held-out tasks`);
    return {
      schedule,
      ...(await stageTimes(run.client, run.runId)),
      // Start to end as the user waits for it (the histories' span is a little shorter).
      wallSeconds: Math.round(run.seconds * 10) / 10,
      // Near 1: the cores were the limit, and overlapping stages only shares them.
      hostCpuBusyShare:
        Math.round(((cpuAfter.busy - cpuBefore.busy) / Math.max(1, cpuAfter.total - cpuBefore.total)) * 100) / 100,
      production: production.policyVersion,
      heldoutGainOverBase: pairedGain(base.meanRewardByTask, production.meanRewardByTask),
      finalSuccess: production.meanRewardByTask,
      iterations: status.iterations.map((i) => ({
        iteration: i.iteration,
        candidate: i.candidate,
        gate: i.gate?.verdict,
      })),
    };
  } finally {
    await run.close();
  }
}

const sync = await measured('sync');
const async = await measured('async');
const { finalSuccess: syncFinal, ...syncShown } = sync;
const { finalSuccess: asyncFinal, ...asyncShown } = async;
console.log(
  JSON.stringify(
    {
      cpus: os.cpus().length,
      rolloutsPerIteration: Number(values.tasks) * Number(values.samples),
      speedup: Math.round((sync.wallSeconds / async.wallSeconds) * 100) / 100,
      asyncMinusSyncFinal: pairedGain(syncFinal, asyncFinal),
      sync: syncShown,
      async: asyncShown,
    },
    null,
    2,
  ),
);
