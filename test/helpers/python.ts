import { existsSync } from 'node:fs';
import path from 'node:path';

/** The trainer's Python environment that `npm run setup` installs (torch, transformers, peft, safetensors, numpy). */
export function setupPython(): string {
  const python = path.resolve(import.meta.dirname, '../../.tools/trainer/bin/python');
  if (!existsSync(python))
    throw new Error(`${python} is missing: run \`npm run setup\` to install the trainer's Python environment`);
  return python;
}

/** The environment that runs `python -m rein_trainer` from the checkout. */
export function trainerEnv(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PYTHONPATH: path.resolve(import.meta.dirname, '../../trainer'),
    PYTHONUNBUFFERED: '1',
  };
}
