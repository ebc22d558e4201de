import { existsSync } from 'node:fs';
import path from 'node:path';

/** The Python that `npm run setup` installs with `safetensors` and `numpy`, for cross-language checks. */
export function setupPython(): string {
  const python = path.resolve(import.meta.dirname, '../../.tools/python/bin/python');
  if (!existsSync(python)) throw new Error(`${python} is missing: run \`npm run setup\` to install the Python test tools`);
  return python;
}
