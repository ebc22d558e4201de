import type { Command } from 'commander';
import { connectTemporal } from '../../client/temporal.js';
import { runPreflight, type PreflightRun } from '../../client/preflight.js';
import { cliContext, temporalUiUrl, workflowUrl, type GlobalOptions } from '../context.js';
import { startLocalWorker } from '../local-worker.js';

export function registerDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .description('run the preflight workflow: is Temporal reachable, does a worker poll, can its host do the work?')
    .option('--no-local-worker', 'do not start a worker in this process; rely on running `rein worker`s')
    .action(async (options: { localWorker: boolean }) => {
      const { config, logger } = cliContext(program.opts<GlobalOptions>());
      const temporal = await connectTemporal(config.temporal);
      const worker = options.localWorker ? await startLocalWorker(config, logger, { serveMetrics: false }) : undefined;
      try {
        const run = await runPreflight(temporal.client, config.temporal.taskQueue);
        const ui = temporalUiUrl(config);
        process.stdout.write(formatPreflight(run, config.temporal.namespace, ui));
        if (!run.result.ok) process.exitCode = 1;
      } finally {
        await worker?.stop();
        await temporal.close();
      }
    });
}

export function formatPreflight(run: PreflightRun, namespace: string, uiUrl: string | undefined): string {
  const { worker } = run.result;
  const lines = [
    `Preflight ${run.result.ok ? 'passed' : 'FAILED'} on worker ${worker.host} (pid ${worker.pid})`,
    ...worker.checks.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`),
    `Workflow: ${run.workflowId}`,
  ];
  if (uiUrl) lines.push(`Web UI:   ${workflowUrl(uiUrl, namespace, run.workflowId, run.runId)}`);
  return `${lines.join('\n')}\n`;
}
