import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { connectTemporal, ensureSearchAttributes } from '../src/client/temporal.js';
import { validateConfig } from '../src/config/load.js';
import { quietBundlerLogger, workflowsPath } from '../workers/workflow-bundle.js';
import { startTestDevServer } from './helpers/dev-server.js';
import { startTestPostgres } from './helpers/embedded-postgres.js';
import { freePort } from './helpers/ports.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** host:port of the dev server every test shares. */
    temporalAddress: string;
    /** The workflows bundled once, for the workers tests create. */
    workflowBundleCode: string;
    /**
     * postgres://… of the superuser of the one PostgreSQL server every test shares (freshPostgresUrl makes a database
     * on it).
     */
    postgresAdminUrl: string;
  }
}

/** One real Temporal dev server for the whole run, started and awaited here rather than by the SDK. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-test-temporal-'));
  const port = await freePort();
  // Started alongside the dev server; each test file makes its own database on it.
  const postgresStarting = startTestPostgres();
  const server = await startTestDevServer(path.join(dir, 'dev.sqlite'), port).catch(async (err: unknown) => {
    await (await postgresStarting.catch(() => undefined))?.stop();
    throw err;
  });
  let postgres: Awaited<typeof postgresStarting> | undefined;
  try {
    postgres = await postgresStarting;
    project.provide('postgresAdminUrl', postgres.adminUrl);
    const temporal = await connectTemporal({
      ...validateConfig({}, 'test defaults').temporal,
      address: server.address,
    });
    await ensureSearchAttributes(temporal.connection, 'default');
    await temporal.close();
    project.provide('temporalAddress', server.address);
    project.provide('workflowBundleCode', await workflowBundleCode());
  } catch (err) {
    await server.stop();
    await postgres?.stop();
    throw err;
  }
  return async () => {
    await server.stop();
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}

/**
 * The bundle `npm run build` wrote when the tests run Rein from dist/ (scripts/test.sh checks it is fresh), else the
 * sources bundled now.
 */
async function workflowBundleCode(): Promise<string> {
  const prebuilt = path.resolve(import.meta.dirname, '../dist/workflows/bundle.cjs');
  if (process.env.REIN_TEST_CLI === 'dist' && existsSync(prebuilt)) return readFileSync(prebuilt, 'utf8');
  return (await bundleWorkflowCode({ workflowsPath: workflowsPath(), logger: quietBundlerLogger })).code;
}
