import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  continueRun,
  PromotionConflictError,
  promotionGuard,
  startRun,
  trainingRunInput,
} from '../../src/client/runs.js';
import { loadConfig } from '../../src/config/load.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { testClient } from '../helpers/temporal.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-promotion-guard-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// No worker polls these task queues: every run started here stays running until terminated.
describe('two runs promoting into one production', () => {
  it(
    'refuses the second at start and on continuation, unless it does not promote, uses another store, or the config allows it',
    { timeout: 120_000 },
    async () => {
      const { file, taskQueue } = await writeExampleConfig(dir, { iterations: 1 });
      const { config } = loadConfig({ file, env: {} });
      const { client, connection } = await testClient();
      const started: string[] = [];
      const start = async (runId: string, guard = promotionGuard(config), promote = true) => {
        const input = trainingRunInput(config);
        await startRun(
          client,
          taskQueue,
          { ...input, runId, release: { samplesPerTask: input.release?.samplesPerTask ?? 1, promote } },
          config,
          guard,
        );
        started.push(runId);
      };
      try {
        await start('guard-first');
        // The guard reads Temporal's visibility store, which records a start a moment after it.
        for (;;) {
          const listed = client.workflow.list({ query: `WorkflowId = 'guard-first' AND ExecutionStatus = 'Running'` });
          if ((await listed[Symbol.asyncIterator]().next()).done === false) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const refused = await start('guard-second').catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(PromotionConflictError);
        expect((refused as Error).message).toMatch(
          /^run guard-first \(started .*\) is still running and promotes into production of (sqlite|postgres):.*gate\.concurrentRuns: allow$/,
        );
        await expect(client.workflow.getHandle('guard-second').describe()).rejects.toThrow();

        await start('guard-no-promote', promotionGuard(config), false);
        await start(
          'guard-other-store',
          promotionGuard({
            ...config,
            dataDir: path.join(dir, 'elsewhere'),
            store: { ...config.store, url: undefined },
          }),
        );
        await start('guard-allowed', { ...promotionGuard(config), allowConcurrent: true });
        await expect(start('guard-refused')).rejects.toThrow(PromotionConflictError);

        // A run that ended is not continued while another promotes into its production.
        await client.workflow.getHandle('guard-allowed').terminate('test: ended so it can be continued');
        await expect(continueRun(client, 'guard-allowed')).rejects.toThrow(
          /run guard-first .*still running and promotes into production of (sqlite|postgres):/,
        );
        await client.workflow.getHandle('guard-first').terminate('test: production is free again');
        const continued = await continueRun(client, 'guard-allowed');
        expect(continued.executionRunId).toBeTruthy();
      } finally {
        for (const runId of started)
          await client.workflow
            .getHandle(runId)
            .terminate('test over')
            .catch(() => undefined);
        await connection.close();
      }
    },
  );
});
