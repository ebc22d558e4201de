import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { builtConsoleDir, bundleConsole } from './assets.js';

/** `npm run build`'s last step: the console bundled into dist/console/, which the compiled package serves. */
const dir = builtConsoleDir();
mkdirSync(dir, { recursive: true });
for (const [name, body] of Object.entries(await bundleConsole())) writeFileSync(path.join(dir, name), body);
process.stdout.write(`console bundled into ${dir}\n`);
