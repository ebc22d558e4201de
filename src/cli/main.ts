import { TrainerInputError } from '../policy/trainer-input.js';
import { Command, CommanderError } from 'commander';
import { ScheduleError } from '../client/schedules.js';
import { ConfigError } from '../config/load.js';
import { TemporalCliNotFoundError } from '../devserver/temporal-cli.js';
import { registerApiCommand } from './commands/api.js';
import { registerArtifactsCommands } from './commands/artifacts.js';
import { registerConfigCommands } from './commands/config.js';
import { registerDevCommand } from './commands/dev.js';
import { registerDoctorCommand } from './commands/doctor.js';
import { registerGcCommand } from './commands/gc.js';
import { registerGatewayCommand } from './commands/gateway.js';
import { registerPolicyCommands } from './commands/policy.js';
import { registerReleaseCommands } from './commands/release.js';
import { registerRunCommands } from './commands/runs.js';
import { registerScheduleCommands } from './commands/schedule.js';
import { registerServerCommand } from './commands/server.js';
import { registerShadowCommands } from './commands/shadow.js';
import { registerTrainCommand } from './commands/train.js';
import { registerWorkerCommand } from './commands/worker.js';
import { configFileUsed } from './context.js';
import { PortInUseError } from './port-in-use.js';

export function buildProgram(): Command {
  const program = new Command('rein')
    .description("Reinforcement learning for the model behind an agent, inside the agent's own harness")
    .option('-c, --config <file>', 'config file, YAML or JSON (default: REIN_CONFIG, or rein.yaml in this folder)')
    .showHelpAfterError()
    // Each command's help lists --config too: it is given before or after the command name.
    .configureHelp({ showGlobalOptions: true })
    .exitOverride();
  registerDevCommand(program);
  registerServerCommand(program);
  registerWorkerCommand(program);
  registerGatewayCommand(program);
  registerApiCommand(program);
  registerPolicyCommands(program);
  registerTrainCommand(program);
  registerRunCommands(program);
  registerReleaseCommands(program);
  registerShadowCommands(program);
  registerScheduleCommands(program);
  registerDoctorCommand(program);
  registerGcCommand(program);
  registerArtifactsCommands(program);
  registerConfigCommands(program);
  return program;
}

/** Exit codes: 0 success, 1 the work failed, 2 bad usage or configuration. */
export async function main(argv: string[]): Promise<number> {
  // Everything Rein writes (traces, rollout folders and harness logs with rollout keys, checkpoints)
  // and every program it starts gets owner-only modes; the stores set theirs explicitly as well.
  process.umask(0o077);
  try {
    await buildProgram().parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    const usage = err instanceof ConfigError || err instanceof TemporalCliNotFoundError || err instanceof ScheduleError || err instanceof TrainerInputError || err instanceof PortInUseError;
    process.stderr.write(`rein: ${(err as Error).message}\n`);
    // Without a config file the command talked to the defaults; Rein running elsewhere with its own config is the usual cause.
    if (configFileUsed === undefined) process.stderr.write(`rein: no config file was read (no --config, REIN_CONFIG or rein.yaml in ${process.cwd()}), so this used the defaults; if Rein runs with a config elsewhere, pass it: rein --config FILE …\n`);
    return usage ? 2 : 1;
  }
}
