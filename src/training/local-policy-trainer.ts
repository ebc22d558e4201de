import { existsSync } from 'node:fs';
import path from 'node:path';
import type { TrainerSettings } from '../config/schema.js';
import { packageRoot, reinCommand } from '../package-root.js';
import type { TrainResult } from '../policy/local-trainer.js';
import { runCommand } from '../rollouts/process.js';
import { isTrainerRefusal, PolicySetupError, PolicyUpdateError } from './errors.js';
import type { PolicyTrainer } from './policy-trainer.js';
import { trainerConfigOf, writeTrainerConfig, type TrainerConfig } from './trainer-config.js';
import { trainerLogFile } from './trainer-log.js';

/** The Python environment `npm run setup` installs the PyTorch trainer's pinned packages into. */
export function defaultTrainerPython(): string {
  return path.join(packageRoot(), '.tools', 'trainer', 'bin', 'python');
}

interface TrainerPaths {
  parentCheckpoint: string;
  batchPath: string;
  outputDir: string;
  /** The update's trainer config (trainer-config.ts), which the PyTorch trainer reads. */
  configFile: string;
}

/** `rein policy train`'s flags for the settings of a config (the tfjs trainer takes no config file). */
function tfjsSettingsArgs(config: TrainerConfig): string[] {
  return [
    ...['--seed', String(config.seed), '--lr', String(config.learningRate), '--epochs', String(config.epochs)],
    ...[
      '--minibatch',
      String(config.minibatchSize),
      '--clip',
      String(config.clipEpsilon),
      '--max-grad-norm',
      String(config.maxGradNorm),
    ],
  ];
}

/**
 * The command line of one update with the configured engine: `rein policy train` (tfjs) or `python -m rein_trainer
 * train --config FILE`.
 */
export function trainerCommand(
  settings: TrainerSettings,
  job: TrainerPaths,
): { command: string; args: string[]; env: Record<string, string> } {
  const paths = ['--checkpoint', job.parentCheckpoint, '--batch', job.batchPath, '--out', job.outputDir];
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
  if (settings.engine === 'tfjs') {
    const rein = reinCommand();
    return {
      command: rein.command,
      args: [...rein.args, 'policy', 'train', ...paths, ...tfjsSettingsArgs(trainerConfigOf(settings))],
      env,
    };
  }
  const command = settings.pytorch.python ?? process.env.REIN_TRAINER_PYTHON ?? defaultTrainerPython();
  if (!existsSync(command)) {
    throw new PolicySetupError(
      `the PyTorch trainer's Python ${command} does not exist: run \`npm run setup\` (it installs the trainer's pinned environment) or set trainer.pytorch.python`,
    );
  }
  const trainerPackage = path.join(packageRoot(), 'trainer');
  return {
    command,
    args: ['-m', 'rein_trainer', 'train', ...paths, '--config', job.configFile],
    env: {
      ...env,
      PYTHONPATH: [trainerPackage, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter),
      PYTHONUNBUFFERED: '1',
    },
  };
}

/**
 * A trainer as a local child process (its own process group, killed on cancel). Exit 2 (bad
 * input: another batch format, architecture or tokenizer) and 3 (out of memory) are refusals a
 * retry cannot change: the update fails without retries, with the trainer's own message.
 */
export function localPolicyTrainer(settings: TrainerSettings, logDir: string): PolicyTrainer {
  return {
    async train({ parentCheckpoint, batchPath, outputDir, signal, followLog }) {
      const configFile = writeTrainerConfig(logDir, outputDir, trainerConfigOf(settings));
      const { command, args, env } = trainerCommand(settings, { parentCheckpoint, batchPath, outputDir, configFile });
      const logFile = trainerLogFile(logDir, outputDir);
      const following = followLog?.(logFile);
      const run = await runCommand({ command, args, env, timeoutMs: 24 * 3600_000, logFile, signal }).finally(() =>
        following?.stop(true),
      );
      if (run.cancelled) throw new PolicyUpdateError('the policy update was cancelled');
      const said =
        run.stderrTail
          .trim()
          .split('\n')
          .filter((line) => /^(rein|rein-trainer): /.test(line))
          .at(-1) ?? run.stderrTail.trim().slice(-500);
      if (isTrainerRefusal(run.exitCode))
        throw new PolicySetupError(`the ${settings.engine} trainer refused the update: ${said}`);
      if (run.exitCode !== 0)
        throw new PolicyUpdateError(
          `the ${settings.engine} trainer ${run.spawnError ?? `exited with ${run.exitCode ?? run.killedBy}`}: ${said}`,
        );
      // The trainer prints its result (which says whether it reused an earlier one) as its last line.
      return JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '') as TrainResult;
    },
  };
}
