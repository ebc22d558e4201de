import type { Command } from 'commander';
import { runPreflight } from '../../client/preflight.js';
import { cliContext, untilInterrupted, type GlobalOptions } from '../context.js';
import { startLocalWorker } from '../local-worker.js';
import { bringUpTemporal } from '../temporal-up.js';
import { formatPreflight } from './doctor.js';

export function registerDevCommand(program: Command): void {
  program
    .command('dev')
    .description('start everything the embedded default needs (Temporal dev server and a worker), check it, and keep it running')
    .action(async () => {
      const { config, logger } = cliContext(program.opts<GlobalOptions>());
      const up = await bringUpTemporal(config, logger);
      let worker;
      try {
        worker = await startLocalWorker(config, logger);
        const run = await runPreflight(up.temporal.client, config.temporal.taskQueue);
        process.stdout.write(formatPreflight(run, config.temporal.namespace, up.uiUrl));
        if (!run.result.ok) throw new Error('preflight failed; see the checks above');
        process.stdout.write(
          `Rein is ready: Temporal at ${up.temporal.connection.options.address}` +
            (up.uiUrl ? `, Web UI ${up.uiUrl}` : '') +
            `, worker on task queue "${config.temporal.taskQueue}". Press Ctrl-C to stop.\n`,
        );
        const stopped = await Promise.race([
          untilInterrupted(),
          worker.done.then(() => 'worker stopped' as const),
          up.devServer?.exited.then((code) => `dev server exited (code ${String(code)})` as const) ?? new Promise<never>(() => {}),
        ]);
        if (stopped !== 'SIGINT' && stopped !== 'SIGTERM') throw new Error(`${stopped} unexpectedly`);
      } finally {
        await worker?.stop();
        await up.shutdown();
      }
    });
}
