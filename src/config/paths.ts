import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';
import { embeddedBaseCheckpoint } from './embedded-default.js';
import { ConfigError, type LoadedConfig } from './load.js';
import type { ReinConfig } from './schema.js';

type Kind = 'file' | 'folder' | 'program';

interface PathSetting {
  key: string;
  kind: Kind;
  /** What belongs there, for the fix: "give the path of …", "give …". */
  fix: string;
  /**
   * The path as loadConfig resolved it; undefined when the key is unset (or, for a program, a name looked up on PATH).
   */
  at(config: ReinConfig): string | undefined;
}

const optional = ', or remove the key';

/**
 * Every file and folder a config names that Rein reads, not writes: the task sets `rein train`
 * reads, and what the workers read (they run with the same config, so the same paths). The data
 * directory and what Rein creates in it are not here.
 */
export const PATH_SETTINGS: readonly PathSetting[] = [
  {
    key: 'run.trainTasks',
    kind: 'file',
    fix: 'give the path of the JSONL task set to train on',
    at: (c) => c.run.trainTasks,
  },
  {
    key: 'run.heldoutTasks',
    kind: 'file',
    fix: `give the path of the JSONL task set replayed at the gate${optional}`,
    at: (c) => c.run.heldoutTasks,
  },
  {
    key: 'run.base.checkpoint',
    kind: 'folder',
    fix: `give the checkpoint folder of the policy runs start from${optional} (the embedded base)`,
    // Unset, it is the base shipped with Rein: not the config's to fix.
    at: (c) => (c.run.base.checkpoint === embeddedBaseCheckpoint() ? undefined : c.run.base.checkpoint),
  },
  {
    key: 'samples.tokenizerDir',
    kind: 'folder',
    fix: `give the folder of the model's tokenizer.json and tokenizer_config.json${optional}`,
    at: (c) => c.samples.tokenizerDir,
  },
  {
    key: 'harness.local.cwd',
    kind: 'folder',
    fix: "give the harness's working directory",
    at: (c) => c.harness?.local?.cwd,
  },
  {
    key: 'harness.local.command',
    kind: 'program',
    fix: 'give the path of the harness program',
    at: (c) => programPath(c.harness?.local),
  },
  {
    key: 'harness.kubernetes.template',
    kind: 'file',
    fix: "give the path of the harness's Job manifest",
    at: (c) => c.harness?.kubernetes?.template,
  },
  {
    key: 'harness.kubernetes.kubeconfig',
    kind: 'file',
    fix: `give the path of a kubeconfig file${optional}`,
    at: (c) => c.harness?.kubernetes?.kubeconfig,
  },
  {
    key: 'environment.module',
    kind: 'file',
    fix: 'give the path of the environment module (its default export: reset, step, tools)',
    at: (c) => c.environment?.module,
  },
  { key: 'verifier.cwd', kind: 'folder', fix: "give the verifier's working directory", at: (c) => c.verifier?.cwd },
  {
    key: 'verifier.command',
    kind: 'program',
    fix: 'give the path of the verifier program',
    at: (c) => programPath(c.verifier),
  },
  {
    key: 'trainer.kubernetes.template',
    kind: 'file',
    fix: "give the path of the trainer's Job manifest",
    at: (c) => c.trainer.kubernetes?.template,
  },
  {
    key: 'trainer.kubernetes.kubeconfig',
    kind: 'file',
    fix: `give the path of a kubeconfig file${optional}`,
    at: (c) => c.trainer.kubernetes?.kubeconfig,
  },
  ...(['clientCertPath', 'clientKeyPath', 'serverCaCertPath'] as const).map((name) => ({
    key: `temporal.tls.${name}`,
    kind: 'file' as const,
    fix: 'give the path of the PEM file',
    at: (c: ReinConfig) => (typeof c.temporal.tls === 'object' ? c.temporal.tls[name] : undefined),
  })),
];

/** The task sets `rein train` (and `rein schedule create`) read before they start anything. */
export const TASK_SET_KEYS: readonly string[] = ['run.trainTasks', 'run.heldoutTasks'];

/**
 * A program given as a path (resolved against its working directory), not a name looked up on PATH; none while that
 * directory is missing.
 */
function programPath(program: { command: string; cwd?: string | undefined } | undefined): string | undefined {
  if (!program?.command.includes('/')) return undefined;
  return program.cwd !== undefined && !isFolder(program.cwd) ? undefined : program.command;
}

function isFolder(dir: string): boolean {
  return statSync(dir, { throwIfNoEntry: false })?.isDirectory() === true;
}

/**
 * The paths a loaded config names that are not there, or not what they should be: one line per
 * key, naming it, the path as resolved and the fix. `keys` limits the check to those settings.
 */
export function pathProblems(loaded: LoadedConfig, keys?: readonly string[]): string[] {
  const base = loaded.file
    ? `relative paths in a config file are read from its folder, ${path.dirname(loaded.file)}`
    : `no config file: relative paths are read from the working directory`;
  const problems: string[] = [];
  for (const setting of PATH_SETTINGS) {
    if (keys && !keys.includes(setting.key)) continue;
    const at = setting.at(loaded.config);
    if (at === undefined) continue;
    const problem = pathProblem(at, setting);
    if (problem === 'does not exist') {
      problems.push(
        `${setting.key}: ${at} does not exist; ${setting.fix} (${setting.kind === 'program' ? 'a relative path is read from its working directory' : base})`,
      );
    } else if (problem) problems.push(`${setting.key}: ${at} ${problem}`);
  }
  return problems;
}

/** What is wrong with what lies at a path, with the fix when it is not the setting's own. */
function pathProblem(at: string, setting: PathSetting): string | undefined {
  const stat = statSync(at, { throwIfNoEntry: false });
  if (!stat) return 'does not exist';
  if (setting.kind === 'folder') return stat.isDirectory() ? undefined : `is not a folder; ${setting.fix}`;
  if (!stat.isFile()) return `${stat.isDirectory() ? 'is a folder, not a file' : 'is not a file'}; ${setting.fix}`;
  if (setting.kind === 'file') return undefined;
  try {
    accessSync(at, constants.X_OK);
    return undefined;
  } catch {
    return 'is not executable; make it executable (chmod +x), or give its interpreter as the command and it as an argument';
  }
}

/** Throws a ConfigError (a usage error: exit 2) listing pathProblems, if there are any. */
export function checkPaths(loaded: LoadedConfig, keys?: readonly string[]): void {
  const problems = pathProblems(loaded, keys);
  if (problems.length > 0) throw new ConfigError(loaded.file ?? 'defaults and environment', problems);
}
