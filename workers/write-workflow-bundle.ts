import { writePrebuiltBundle } from './workflow-bundle.js';

/** `npm run build`: the workflows bundled once into dist/workflows/bundle.cjs (see workflow-bundle.ts). */
process.stdout.write(`workflows bundled into ${await writePrebuiltBundle()}\n`);
