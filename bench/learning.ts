/**
 * The embedded default learning for real: the example calculator agent (a separate program using
 * the openai client) runs through the gateway against the embedded policy server, the verifier
 * scores it, the batch stage and the local trainer make a new version, and the pinned held-out
 * set is replayed greedily before and after. The baseline is the base checkpoint's held-out
 * success in the same run.
 *
 *   npm run bench:learning [-- --iterations 6 --tasks 32 --samples 8]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { exampleLoopOptions } from '../src/training/example-loop.js';
import { runLocalLoop } from '../src/training/local-loop.js';

const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: '6' },
    tasks: { type: 'string', default: '32' },
    samples: { type: 'string', default: '8' },
    lr: { type: 'string' },
    epochs: { type: 'string' },
    heldout: { type: 'string' },
    concurrency: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-learning-'));
const options = exampleLoopOptions({
  workDir,
  iterations: Number(values.iterations),
  tasksPerIteration: Number(values.tasks),
  samplesPerTask: Number(values.samples),
  ...(values.lr && { learningRate: Number(values.lr) }),
  ...(values.epochs && { epochs: Number(values.epochs) }),
  ...(values.heldout && { heldoutLimit: Number(values.heldout) }),
  ...(values.concurrency && { concurrency: Number(values.concurrency) }),
});
const report = await runLocalLoop({ ...options, log: (line) => console.log(line) });
const { before, after } = report.heldout;
const tasks = Object.keys(before.perTask);
const gained = tasks.filter((t) => after.perTask[t] === 1 && before.perTask[t] === 0).length;
const lost = tasks.filter((t) => after.perTask[t] === 0 && before.perTask[t] === 1).length;
console.log(
  JSON.stringify(
    {
      cpus: os.cpus().length,
      iterations: report.iterations.length,
      rolloutsPerIteration: Number(values.tasks) * Number(values.samples),
      heldoutBefore: before.successRate,
      heldoutAfter: after.successRate,
      gainPoints: 100 * (after.successRate - before.successRate),
      pairedTasks: { gained, lost, n: tasks.length },
      wallSeconds: report.seconds,
    },
    null,
    2,
  ),
);
if (!values.keep) rmSync(workDir, { recursive: true, force: true });
else console.log(`kept ${workDir}`);
