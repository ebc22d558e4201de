/**
 * The embedded default learning for real, as `rein train` runs it: a training run on Temporal
 * (the example calculator agent, a separate program using the openai client, through the gateway
 * against the embedded policy server; the verifier; the batch stage; the local trainer). The
 * baseline is the base policy's held-out success, replayed in the same run on the same tasks.
 *
 *   npm run bench:learning [-- --iterations 3 --tasks 32 --samples 8 --lr 0.0003 --epochs 4 --merge exact --seed 1]
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { discordantPairs, mcnemarExactP } from '../src/gate/paired-tests.js';
import type { MergeMode } from '../src/samples/merge-modes.js';
import { embeddedTrainingRun } from './embedded-run.js';

const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: '3' },
    tasks: { type: 'string', default: '32' },
    samples: { type: 'string', default: '8' },
    lr: { type: 'string' },
    epochs: { type: 'string' },
    heldout: { type: 'string' },
    'heldout-every': { type: 'string' },
    concurrency: { type: 'string' },
    keep: { type: 'boolean', default: false },
    merge: { type: 'string' },
    seed: { type: 'string' },
  },
});
const number = (v: string | undefined) => (v === undefined ? undefined : Number(v));
const run = await embeddedTrainingRun({
  iterations: Number(values.iterations),
  tasks: Number(values.tasks),
  samples: Number(values.samples),
  learningRate: number(values.lr),
  epochs: number(values.epochs),
  heldoutLimit: number(values.heldout),
  heldoutEvery: number(values['heldout-every']),
  concurrency: number(values.concurrency),
  merge: values.merge as MergeMode | undefined,
  agentSeed: values.seed,
});
const status = run.report.status;
const base = status?.heldout?.base;
const final = status?.heldout?.latest;
if (!base || !final) throw new Error(`the run did not replay held-out tasks: ${JSON.stringify(run.report)}`);
const success = (byTask: Record<string, number>) =>
  Object.values(byTask).filter((r) => r > 0).length / Object.keys(byTask).length;
const { gained, lost } = discordantPairs(base.meanRewardByTask, final.meanRewardByTask);
console.log(
  JSON.stringify(
    {
      cpus: os.cpus().length,
      merge: values.merge ?? 'exact',
      agentSeed: values.seed ?? null,
      iterations: status.iterations,
      rolloutsPerIteration: Number(values.tasks) * Number(values.samples),
      heldoutBase: success(base.meanRewardByTask),
      heldoutFinal: success(final.meanRewardByTask),
      gainPoints: 100 * (success(final.meanRewardByTask) - success(base.meanRewardByTask)),
      pairedTasks: {
        gained: gained.length,
        lost: lost.length,
        n: Object.keys(base.meanRewardByTask).length,
        mcnemarP: mcnemarExactP(gained.length, lost.length),
      },
      wallSeconds: run.seconds,
    },
    null,
    2,
  ),
);
await run.close({ keep: values.keep });
if (values.keep) console.log(`kept ${run.workDir}`);
