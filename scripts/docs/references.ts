import { readFileSync } from 'node:fs';
import path from 'node:path';
import { cliReference } from './cli-reference.js';
import { configReference } from './config-reference.js';
import { FAILURE_CLASSES_PAGE, failureClassesPage } from './failure-classes.js';
import { httpReference } from './http-reference.js';

export const REPO_ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * The generated references, by path relative to the repository root, as `npm run docs` writes them; and the rollouts
 * page with its failure-class table.
 */
export async function generatedReferences(): Promise<Map<string, string>> {
  return new Map([
    ['docs/reference/config.md', configReference()],
    ['docs/reference/cli.md', await cliReference()],
    ['docs/reference/http-api.md', await httpReference()],
    [FAILURE_CLASSES_PAGE, failureClassesPage(REPO_ROOT)],
  ]);
}

/** The checked-in references that differ from what the generators produce now (missing ones too). */
export async function staleReferences(root = REPO_ROOT): Promise<string[]> {
  const stale: string[] = [];
  for (const [file, text] of await generatedReferences()) {
    let current: string | undefined;
    try {
      current = readFileSync(path.join(root, file), 'utf8');
    } catch {
      current = undefined;
    }
    if (current !== text) stale.push(file);
  }
  return stale;
}
