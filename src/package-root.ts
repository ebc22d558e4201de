import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The folder of Rein's package.json, whether running from src/ (tsx, vitest) or dist/src/. */
export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!isReinPackage(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`Rein's package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}

function isReinPackage(file: string): boolean {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { name?: string }).name === 'rein';
  } catch {
    return false;
  }
}

/**
 * How to run the `rein` CLI as a child process: the compiled CLI, or, when Rein itself runs from
 * its TypeScript sources (tests, tsx), the same sources through tsx, so parent and child agree —
 * unless REIN_TEST_CLI=dist says dist/ is built from these sources (scripts/test.sh checks).
 */
export function reinCommand(): { command: string; args: string[] } {
  if (!import.meta.url.endsWith('.ts') || process.env.REIN_TEST_CLI === 'dist')
    return { command: process.execPath, args: [path.join(packageRoot(), 'bin', 'rein.js')] };
  const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return { command: process.execPath, args: ['--import', tsx, path.join(packageRoot(), 'src', 'cli', 'cli.ts')] };
}
