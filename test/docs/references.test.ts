import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { generatedReferences, REPO_ROOT } from '../../scripts/docs/references.js';

/** The first line where two texts differ, for a message that says where to look. */
function firstDifference(current: string | undefined, generated: string): string {
  if (current === undefined) return 'the file is missing';
  const a = current.split('\n');
  const b = generated.split('\n');
  const line = a.findIndex((text, i) => text !== b[i]);
  const at = line === -1 ? a.length : line;
  return `line ${at + 1}: checked in ${JSON.stringify(a[at] ?? '(end of file)')}, generated ${JSON.stringify(b[at] ?? '(end of file)')}`;
}

describe('the generated references (docs/reference/)', () => {
  it('are what `npm run docs` makes from the schema, the CLI and the API now', async () => {
    const stale: string[] = [];
    for (const [file, generated] of await generatedReferences()) {
      let current: string | undefined;
      try {
        current = readFileSync(path.join(REPO_ROOT, file), 'utf8');
      } catch {
        current = undefined;
      }
      if (current !== generated) stale.push(`${file} is out of date (${firstDifference(current, generated)})`);
    }
    expect(stale, `${stale.join('\n')}\nrun npm run docs and commit docs/reference/`).toEqual([]);
  });
});
