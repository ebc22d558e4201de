import { existsSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, type WorkflowBundleOption } from '@temporalio/worker';

/**
 * The workflows bundled at build time (`npm run build` writes it beside the compiled workflows):
 * every `rein worker`, `rein dev` and `rein train` that starts a worker from dist/ loads it instead
 * of bundling workflows/ again, which costs seconds of CPU per start. npm run build deletes dist/
 * first, so the bundle is always of the workflows compiled beside it.
 */
export function prebuiltBundlePath(): string {
  return fileURLToPath(new URL('../workflows/bundle.cjs', import.meta.url));
}

/** Where a worker gets its workflows: the prebuilt bundle when running compiled, else workflows/ bundled at start. */
export function workflowSource(): { workflowBundle: WorkflowBundleOption } | { workflowsPath: string } {
  const bundle = prebuiltBundlePath();
  if (!import.meta.url.endsWith('.ts') && existsSync(bundle)) return { workflowBundle: { codePath: bundle } };
  return { workflowsPath: workflowsPath() };
}

/** workflows/index as source (tsx, vitest) or compiled (dist/), whichever this module runs from. */
export function workflowsPath(): string {
  for (const ext of ['.ts', '.js']) {
    const file = fileURLToPath(new URL(`../workflows/index${ext}`, import.meta.url));
    if (existsSync(file)) return file;
  }
  throw new Error('workflows/index not found next to workers/');
}

/** `npm run build`'s step that writes the bundle. */
export async function writePrebuiltBundle(): Promise<string> {
  const { code } = await bundleWorkflowCode({ workflowsPath: workflowsPath(), logger: quietBundlerLogger });
  writeFileSync(prebuiltBundlePath(), code);
  return prebuiltBundlePath();
}

/** The bundler's webpack chatter stays out of the build's and tests' output; warnings and errors do not. */
export const quietBundlerLogger = {
  log: () => {},
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: (message: string) => console.warn(message),
  error: (message: string) => console.error(message),
};
