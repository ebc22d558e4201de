import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TrainerInputError } from '../policy/trainer-input.js';
import { Command, CommanderError } from 'commander';
import { ScheduleError } from '../client/schedule-error.js';
import { ConfigError } from '../config/load.js';
import type { ReinConfig } from '../config/schema.js';
import { TemporalCliNotFoundError } from '../devserver/temporal-cli.js';
import { packageRoot } from '../package-root.js';
import { configFileUsed, defaultSettings, helpSettings } from './context.js';
import { PortInUseError } from './port-in-use.js';

/** Adds a module's commands; `settings` are what their help shows (the ports services listen on). */
type RegisterCommands = (program: Command, settings: ReinConfig) => void;

/**
 * Each command module and the top-level commands it adds, in help order. A command loads only its
 * own module and what that imports (`rein gateway` never loads the Temporal worker, tfjs or the
 * Kubernetes client); help and unknown commands load them all. main.test.ts checks the names.
 */
export const commandModules: ReadonlyArray<{ commands: readonly string[]; load: () => Promise<RegisterCommands> }> = [
  { commands: ['dev'], load: async () => (await import('./commands/dev.js')).registerDevCommand },
  { commands: ['server'], load: async () => (await import('./commands/server.js')).registerServerCommand },
  { commands: ['worker'], load: async () => (await import('./commands/worker.js')).registerWorkerCommand },
  { commands: ['gateway'], load: async () => (await import('./commands/gateway.js')).registerGatewayCommand },
  { commands: ['api'], load: async () => (await import('./commands/api.js')).registerApiCommand },
  { commands: ['policy'], load: async () => (await import('./commands/policy.js')).registerPolicyCommands },
  { commands: ['train'], load: async () => (await import('./commands/train.js')).registerTrainCommand },
  {
    commands: ['runs', 'status', 'pause', 'stop', 'cancel', 'resume', 'policies'],
    load: async () => (await import('./commands/runs.js')).registerRunCommands,
  },
  {
    commands: ['register', 'gate', 'promote', 'rollback', 'decision', 'decisions', 'ledger'],
    load: async () => (await import('./commands/release.js')).registerReleaseCommands,
  },
  { commands: ['shadow'], load: async () => (await import('./commands/shadow.js')).registerShadowCommands },
  { commands: ['schedule'], load: async () => (await import('./commands/schedule.js')).registerScheduleCommands },
  { commands: ['doctor'], load: async () => (await import('./commands/doctor.js')).registerDoctorCommand },
  { commands: ['gc'], load: async () => (await import('./commands/gc.js')).registerGcCommand },
  { commands: ['artifacts'], load: async () => (await import('./commands/artifacts.js')).registerArtifactsCommands },
  { commands: ['config'], load: async () => (await import('./commands/config.js')).registerConfigCommands },
];

export interface ProgramOptions {
  /**
   * What help texts show: these settings, or 'defaults' (for references that must not depend on a config); default: the
   * config this command line names (helpSettings).
   */
  settings?: ReinConfig | 'defaults';
  /** Where that config is looked for (REIN_CONFIG, rein.yaml); default: this process's environment and folder. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

/** The program for these arguments (process.argv's form): the named command's module, or every module. */
export async function buildProgram(argv: readonly string[] = [], options: ProgramOptions = {}): Promise<Command> {
  const program = new Command('rein')
    .description("Reinforcement learning for the model behind an agent, inside the agent's own harness")
    .option('-c, --config <file>', 'config file, YAML or JSON (default: REIN_CONFIG, or rein.yaml in this folder)')
    .version(reinVersion(), '-V, --version', "print Rein's version and exit")
    .showHelpAfterError()
    // Each command's help lists --config too: it is given before or after the command name.
    .configureHelp({ showGlobalOptions: true })
    .exitOverride();
  const args = argv.slice(2);
  const modules = modulesFor(args);
  if (modules.length === 0) return program;
  const settings =
    options.settings === 'defaults' ? defaultSettings() : (options.settings ?? helpSettings(args, options));
  for (const m of modules) (await m.load())(program, settings);
  return program;
}

/**
 * The modules a command line needs, by its first word that is not a global option or its value:
 * that command's module; none for --version before it; every module for help asked for before it,
 * an unknown word, or no word (commander then shows the help).
 */
function modulesFor(args: readonly string[]): ReadonlyArray<(typeof commandModules)[number]> {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '-c' || arg === '--config') i++;
    else if (arg === '-h' || arg === '--help') return commandModules;
    else if (arg === '-V' || arg === '--version') return [];
    else if (!arg.startsWith('-')) {
      const own = commandModules.filter((m) => m.commands.includes(arg));
      return own.length > 0 ? own : commandModules;
    }
  }
  return commandModules;
}

/** Rein's version: that of the package.json packageRoot finds, from src/ and dist/src/ alike. */
export function reinVersion(): string {
  return (JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/** Exit codes: 0 success, 1 the work failed, 2 bad usage or configuration. */
export async function main(argv: string[]): Promise<number> {
  // Everything Rein writes (traces, rollout folders and harness logs with rollout keys, checkpoints)
  // and every program it starts gets owner-only modes; the stores set theirs explicitly as well.
  process.umask(0o077);
  try {
    await (await buildProgram(argv)).parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    const usage =
      err instanceof ConfigError ||
      err instanceof TemporalCliNotFoundError ||
      err instanceof ScheduleError ||
      err instanceof TrainerInputError ||
      err instanceof PortInUseError;
    process.stderr.write(`rein: ${(err as Error).message}\n`);
    // Without a config file the command talked to the defaults; Rein running elsewhere with its own config is the usual
    // cause.
    if (configFileUsed === undefined)
      process.stderr.write(
        `rein: no config file was read (no --config, REIN_CONFIG or rein.yaml in ${process.cwd()}), so this used the defaults; if Rein runs with a config elsewhere, pass it: rein --config FILE …\n`,
      );
    return usage ? 2 : 1;
  }
}
