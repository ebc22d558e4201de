import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { discordantPairs, mcnemarExactP } from '../../gate/paired-tests.js';
import { exampleLoopOptions } from '../../training/example-loop.js';
import { runLocalLoop } from '../../training/local-loop.js';
import { cliContext, type GlobalOptions } from '../context.js';

const positive = (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got "${value}".`);
  return n;
};

export function registerTrainCommand(program: Command): void {
  program
    .command('train')
    .description('a training run on the embedded default: the example calculator agent learns on CPU, held-out replay before and after')
    .option('--iterations <n>', 'training iterations', positive, 3)
    .option('--tasks <n>', 'train tasks per iteration', positive, 32)
    .option('--samples <n>', 'rollouts per task (a GRPO group)', positive, 8)
    .option('--heldout <n>', 'held-out tasks replayed before and after (of 128)', positive, 128)
    .option('--concurrency <n>', 'harness processes at once', positive, 16)
    .option('--out <dir>', 'where the run keeps its journal, batches and policies (default: dataDir/runs/<time>)')
    .action(async (options: { iterations: number; tasks: number; samples: number; heldout: number; concurrency: number; out?: string }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const workDir = path.resolve(options.out ?? path.join(config.dataDir, 'runs', new Date().toISOString().replace(/[:.]/g, '-')));
      const controller = new AbortController();
      const cancel = () => controller.abort();
      process.once('SIGINT', cancel);
      process.once('SIGTERM', cancel);
      const say = (line: string) => process.stdout.write(`${line}\n`);
      say(`Training the embedded policy on the example calculator agent; the run is kept in ${workDir}`);
      say(`${options.iterations} iterations × ${options.tasks} tasks × ${options.samples} samples; held-out replay of ${options.heldout} tasks before and after`);
      try {
        const report = await runLocalLoop({
          ...exampleLoopOptions({
            workDir,
            iterations: options.iterations,
            tasksPerIteration: options.tasks,
            samplesPerTask: options.samples,
            heldoutLimit: options.heldout,
            concurrency: options.concurrency,
          }),
          log: say,
          signal: controller.signal,
        });
        const { before, after } = report.heldout;
        const { gained, lost } = discordantPairs(before.perTask, after.perTask);
        const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
        say('');
        say('policy   held-out success');
        say(`base     ${percent(before.successRate)}`);
        say(`${after.policyVersion.padEnd(8)} ${percent(after.successRate)}   (${gained.length} tasks gained, ${lost.length} lost; exact McNemar p = ${mcnemarExactP(gained.length, lost.length).toExponential(1)})`);
        say(`new policy: ${report.finalPolicy}   wall time ${(report.seconds / 60).toFixed(1)} min`);
      } finally {
        process.off('SIGINT', cancel);
        process.off('SIGTERM', cancel);
      }
    });
}
