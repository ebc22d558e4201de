#!/usr/bin/env node
// Runs the compiled CLI; `npm run build` produces dist/.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/cli/cli.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('rein: dist/ is missing; run `npm run build` in the Rein checkout first.\n');
  process.exit(2);
}
await import(entry.href);
