import type * as Esbuild from 'esbuild';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../package-root.js';

/** One file the console serves. */
export interface Asset {
  body: Buffer;
  contentType: string;
}

/** The console's files by name: index.html, app.js (its TypeScript and uPlot, bundled), app.css. */
export type ConsoleAssets = ReadonlyMap<string, Asset>;

const CONTENT_TYPES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

/** Where `npm run build` writes the bundled console (the package ships it; no CDN, no network). */
export const builtConsoleDir = () => path.join(packageRoot(), 'dist', 'console');
const sourceDir = () => path.join(packageRoot(), 'src', 'console', 'web');

let loading: Promise<ConsoleAssets> | undefined;

/**
 * The console's files, loaded once per process: the build's bundle when Rein runs compiled,
 * else bundled now from the sources (tests, tsx), so a change to them shows without a build.
 */
export function consoleAssets(): Promise<ConsoleAssets> {
  loading ??= load().catch((err: unknown) => {
    loading = undefined;
    throw err;
  });
  return loading;
}

async function load(): Promise<ConsoleAssets> {
  const compiled = !import.meta.url.endsWith('.ts');
  const built = builtConsoleDir();
  if (compiled && existsSync(path.join(built, 'app.js'))) {
    return new Map(
      Object.keys(CONTENT_TYPES).map((name) => [
        name,
        { body: readFileSync(path.join(built, name)), contentType: CONTENT_TYPES[name] as string },
      ]),
    );
  }
  const files = await bundleConsole();
  return new Map(
    Object.entries(files).map(([name, body]) => [name, { body, contentType: CONTENT_TYPES[name] as string }]),
  );
}

/** Bundles the console with esbuild (a build-time tool: the compiled package serves the build's output). */
export async function bundleConsole(): Promise<Record<string, Buffer>> {
  let esbuild: typeof Esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    throw new Error(
      `the console is not built: ${builtConsoleDir()} has no app.js, and esbuild (a dev dependency) is not installed to bundle it; run \`npm run build\` where dev dependencies are installed`,
    );
  }
  const dir = sourceDir();
  const result = await esbuild.build({
    entryPoints: { app: path.join(dir, 'main.ts'), 'app-style': path.join(dir, 'style.css') },
    bundle: true,
    write: false,
    outdir: 'out',
    format: 'iife',
    target: 'es2020',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
    absWorkingDir: packageRoot(),
  });
  const output = (name: string) => {
    const file = result.outputFiles.find((f) => path.basename(f.path) === name);
    if (!file) throw new Error(`esbuild wrote no ${name}`);
    return Buffer.from(file.contents);
  };
  return {
    'index.html': readFileSync(path.join(dir, 'index.html')),
    'app.js': output('app.js'),
    'app.css': output('app-style.css'),
  };
}
