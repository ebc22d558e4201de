/**
 * `npm run docs`: writes the generated references (docs/reference/: the config file from the zod
 * schema, the CLI from commander, the HTTP API from its OpenAPI document). `--check` writes
 * nothing and exits 1 naming the references that are out of date.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generatedReferences, REPO_ROOT, staleReferences } from './docs/references.js';

// The references describe the defaults, whatever config or environment this shell has.
for (const variable of ['REIN_CONFIG', 'REIN_DATA_DIR', 'REIN_GATEWAY_PORT']) delete process.env[variable];

if (process.argv.includes('--check')) {
  const stale = await staleReferences();
  for (const file of stale) process.stderr.write(`docs: ${file} is out of date; run npm run docs\n`);
  process.exit(stale.length > 0 ? 1 : 0);
}
for (const [file, text] of await generatedReferences()) {
  const target = path.join(REPO_ROOT, file);
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, text);
  process.stdout.write(`docs: wrote ${file}\n`);
}
// The commands' modules keep handles open (loggers, SDK timers); the work is done.
process.exit(0);
