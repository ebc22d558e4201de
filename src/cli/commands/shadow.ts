import { InvalidArgumentError, type Command } from 'commander';
import { ArtifactNameError, ArtifactNotFoundError } from '../../artifacts/artifact-store.js';
import { artifactStoreFromConfig } from '../../artifacts/from-config.js';
import { runShadow, shadowRunInput } from '../../client/shadow.js';
import type { GatewayControlClient } from '../../gateway/control-client.js';
import { adminKeyFile, gatewayControlFromConfig } from '../../gateway/from-config.js';
import type { ReinConfig } from '../../config/schema.js';
import { PRODUCTION_ALIAS } from '../../registry/promotion.js';
import { formatShadowReport, shadowReport, type ShadowReport } from '../../shadow/report.js';
import { traceStoreFromConfig } from '../../store/open.js';
import { cliContext, type GlobalOptions } from '../context.js';
import { connectOrStartServices } from '../connect-services.js';
import { positiveInteger } from './train.js';

const say = (line: string) => process.stdout.write(`${line}\n`);

function controlOrFail(config: ReinConfig): GatewayControlClient {
  const control = gatewayControlFromConfig(config.gateway);
  if (!control) {
    throw new Error(
      `no gateway admin key here: set REIN_GATEWAY_ADMIN_KEY, or run this where the gateway wrote ${adminKeyFile(config.gateway)}`,
    );
  }
  return control;
}

/**
 * The full report from its artifact; undefined when this machine's artifact store is not the
 * worker's (another folder, another bucket). A report that changed after it was written is an error.
 */
async function readReport(
  config: ReinConfig,
  stored: { uri: string; sha256: string },
): Promise<ShadowReport | undefined> {
  try {
    return JSON.parse((await artifactStoreFromConfig(config).get(stored.uri, stored)).toString('utf8')) as ShadowReport;
  } catch (err) {
    if (err instanceof ArtifactNotFoundError || err instanceof ArtifactNameError) return undefined;
    throw err;
  }
}

/** `rein shadow run|start|stop|report`: a candidate answers production's calls without acting. */
const sampleRate = (value: string) => {
  const n = Number(value);
  if (!(n > 0 && n <= 1)) throw new InvalidArgumentError(`expected a share in (0, 1], e.g. 0.1, got "${value}".`);
  return n;
};

export function registerShadowCommands(program: Command): void {
  const shadow = program
    .command('shadow')
    .description(
      "mirror production's calls to a candidate policy whose answers are recorded, never returned, and report how it would have acted",
    );
  addRunCommand(shadow);
  addMirrorCommands(shadow);
  addReportCommand(shadow);
}

function addRunCommand(shadow: Command): void {
  shadow
    .command('run')
    .description(
      'offline shadow run: the held-out tasks through the harness with production acting, every call mirrored to the candidate; then the report',
    )
    .argument('<candidate>', 'the candidate policy version (the gateway must serve it)')
    .option('--heldout <n>', 'run only the first n held-out tasks', positiveInteger)
    .option('--alias <alias>', 'the alias the harness asks for', PRODUCTION_ALIAS)
    .option('--json', 'print the run result and the full report as JSON')
    .action(
      async (candidate: string, options: { heldout?: number; alias: string; json?: boolean }, command: Command) => {
        const { config, file, logger } = cliContext(command.optsWithGlobals<GlobalOptions>());
        const input = shadowRunInput(
          config,
          candidate,
          { heldoutLimit: options.heldout, alias: options.alias },
          file ?? 'config',
        );
        // With --json, stdout is the JSON alone.
        const { client, close } = await connectOrStartServices(
          config,
          logger,
          options.json ? (line) => process.stderr.write(`${line}\n`) : say,
        );
        try {
          if (!options.json)
            say(
              `Running ${input.heldout.taskIds.length} held-out tasks × ${input.samplesPerTask} with ${input.alias} acting, every call mirrored to ${candidate}…`,
            );
          const result = await runShadow(client, config.temporal.taskQueue, input, config);
          const report = await readReport(config, result.report);
          if (options.json) return void say(JSON.stringify({ result, report: report ?? null }, null, 2));
          const { rollouts } = result;
          say(
            `${rollouts.total} rollouts (${Object.entries(rollouts.byStatus)
              .map(([status, n]) => `${status} ${n}`)
              .join(', ')}) acted by ${result.incumbent}; the mirror on ${result.alias} is cleared.`,
          );
          if (report) process.stdout.write(formatShadowReport(report));
          else
            say(
              `${result.report.mirrored} mirrored calls, ${result.report.compared} compared, ${result.report.disagreed} disagreed`,
            );
          say(`Report: ${result.report.uri}`);
        } finally {
          await close();
        }
      },
    );
}

/** start and stop: mirroring an alias's calls to a candidate, by hand. */
function addMirrorCommands(shadow: Command): void {
  shadow
    .command('start')
    .description("mirror the gateway's live production traffic to a candidate until `rein shadow stop`")
    .argument('<candidate>', 'the candidate policy version (the gateway must serve it)')
    .option('--alias <alias>', 'the alias whose calls are mirrored', PRODUCTION_ALIAS)
    .option('--rate <share>', 'the share of rollouts mirrored, each one whole (0 < share <= 1)', sampleRate, 1)
    .action(async (candidate: string, options: { alias: string; rate: number }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const mirror = await controlOrFail(config).setMirror(options.alias, candidate, options.rate);
      say(
        `Mirroring ${mirror.sampleRate < 1 ? `${(100 * mirror.sampleRate).toFixed(1)}% of the rollouts of ` : ''}${mirror.alias} (served by ${mirror.incumbent}) to ${mirror.candidate}: its answers are recorded, never returned.`,
      );
      say(
        `Calls of pinned rollouts (training, held-out replay) are not mirrored. \`rein shadow report ${mirror.candidate}\` reports, \`rein shadow stop\` stops.`,
      );
    });

  shadow
    .command('stop')
    .description('stop mirroring an alias (shadow calls already sent finish)')
    .option('--alias <alias>', 'the mirrored alias', PRODUCTION_ALIAS)
    .action(async (options: { alias: string }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const control = controlOrFail(config);
      const mirror = (await control.listMirrors()).find((m) => m.alias === options.alias);
      if (!mirror) return void say(`${options.alias} is not mirrored; nothing to stop.`);
      await control.clearMirror(options.alias).catch((err: { code?: string }) => {
        if (err.code !== 'mirror_not_found') throw err;
      });
      say(
        `Stopped mirroring ${options.alias} to ${mirror.candidate}. \`rein shadow report ${mirror.candidate}\` reports what it would have done.`,
      );
    });
}

function addReportCommand(shadow: Command): void {
  shadow
    .command('report')
    .description(
      "what the candidate would have done on every call mirrored to it, against production's actions, split by the rollouts' rewards",
    )
    .argument('<candidate>', 'the candidate policy version')
    .option('--json', 'print the report as JSON')
    .action(async (candidate: string, options: { json?: boolean }, command: Command) => {
      const { config } = cliContext(command.optsWithGlobals<GlobalOptions>());
      const store = await traceStoreFromConfig(config);
      try {
        const report = await shadowReport(store, { candidate });
        if (options.json) return void say(JSON.stringify(report, null, 2));
        process.stdout.write(formatShadowReport(report));
        if (report.mirrored === 0)
          say(
            `Nothing was mirrored to ${candidate} yet: \`rein shadow start ${candidate}\` mirrors live traffic, \`rein shadow run ${candidate}\` the held-out tasks.`,
          );
      } finally {
        await store.close();
      }
    });
}
