import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { NativeConnection } from '@temporalio/worker';
import { inject } from 'vitest';
import { ensureSearchAttributes } from '../../src/client/temporal.js';
import { validateConfig } from '../../src/config/load.js';
import { createLogger } from '../../src/log/logger.js';
import { activityDepsFromConfig } from '../../workers/activity-deps.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { createReinWorker } from '../../workers/worker.js';
import { suiteStoreSettings } from './postgres.js';

/** A client on the shared test dev server. */
export async function testClient(namespace = 'default'): Promise<{ client: Client; connection: Connection }> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  return { client: new Client({ connection, namespace }), connection };
}

/**
 * A namespace of its own on the shared dev server, with Rein's search attributes: for a test that
 * lists runs (the API, the console), which in `default` would also see every other test file's
 * runs, some on workers long gone whose status queries wait out their timeout.
 */
export async function freshNamespace(): Promise<string> {
  const namespace = `test-${randomUUID()}`;
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  try {
    await connection.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
    // A new namespace reaches the server's namespace cache within seconds; until then it is "not found".
    for (let tries = 0; ; tries++) {
      try {
        await ensureSearchAttributes(connection, namespace);
        await new Client({ connection, namespace }).workflow.count();
        return namespace;
      } catch (err) {
        if (tries >= 100) throw err;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } finally {
    await connection.close();
  }
}

/**
 * Runs `fn` while a real Rein worker polls a fresh task queue on the shared dev server, then
 * shuts the worker down.
 */
export async function withReinWorker<T>(
  fn: (ctx: { client: Client; taskQueue: string }) => Promise<T>,
  deps: { dataDir?: string } = {},
): Promise<T> {
  installTemporalRuntime(createLogger('warn'));
  const taskQueue = `test-${randomUUID()}`;
  const nativeConnection = await NativeConnection.connect({ address: inject('temporalAddress') });
  const { client, connection } = await testClient();
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-worker-'));
  const config = validateConfig({}, 'test');
  const { store } = await suiteStoreSettings();
  const activities = await activityDepsFromConfig({
    ...config,
    dataDir: scratch,
    gateway: { ...config.gateway, traceDb: path.join(scratch, 'traces.sqlite') },
    ...(store && { store: { ...config.store, ...store } }),
  });
  try {
    const worker = await createReinWorker({
      connection: nativeConnection,
      namespace: 'default',
      taskQueue,
      ...activities.deps,
      dataDir: deps.dataDir ?? scratch,
      workflowBundle: { code: inject('workflowBundleCode') },
    });
    return await worker.runUntil(fn({ client, taskQueue }));
  } finally {
    await connection.close();
    await nativeConnection.close();
    await activities.close();
  }
}
