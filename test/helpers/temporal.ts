import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { inject } from 'vitest';
import { createLogger } from '../../src/log/logger.js';
import { installTemporalRuntime } from '../../workers/runtime.js';
import { createReinWorker } from '../../workers/worker.js';

/** A client on the shared test dev server. */
export async function testClient(): Promise<{ client: Client; connection: Connection }> {
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  return { client: new Client({ connection }), connection };
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
  try {
    const worker = await createReinWorker({
      connection: nativeConnection,
      namespace: 'default',
      taskQueue,
      dataDir: deps.dataDir ?? os.tmpdir(),
      workflowBundle: { code: inject('workflowBundleCode') },
    });
    return await worker.runUntil(fn({ client, taskQueue }));
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}
