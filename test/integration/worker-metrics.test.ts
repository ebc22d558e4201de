import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RunRolloutsSummary } from '../../activities/run-rollouts.js';
import { taskSetHash } from '../../src/rollouts/tasks.js';
import { startRein, type RunningRein } from '../helpers/cli.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/ports.js';
import { familiesOf, scrape, valueOf } from '../helpers/prometheus.js';
import { testClient } from '../helpers/temporal.js';

const root = path.resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-worker-metrics-'));
// Tasks marked `crash` end the harness with exit code 3 before any model call: a failed rollout of class harness.
const tasks = Array.from({ length: 4 }, (_, i) => ({
  id: `t${i}`,
  question: `${i + 2}*7`,
  answer: (i + 2) * 7,
  ...(i === 3 && { crash: true }),
}));
const taskFile = path.join(dir, 'tasks.jsonl');
const harness = path.join(dir, 'harness.mjs');
let t: TestGateway;
let worker: RunningRein | undefined;

beforeAll(async () => {
  t = await startTestGateway();
  writeFileSync(taskFile, `${tasks.map((task) => JSON.stringify(task)).join('\n')}\n`);
  writeFileSync(
    harness,
    `import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
if (JSON.parse(readFileSync(process.argv[2], 'utf8')).crash) process.exit(3);
execFileSync(process.execPath, [${JSON.stringify(path.join(root, 'examples/calculator-agent/harness.mjs'))}, ...process.argv.slice(2)], { stdio: 'inherit' });
`,
  );
});
afterAll(async () => {
  await worker?.stop('SIGKILL');
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the worker /metrics (worker.metricsPort), scraped from a `rein worker` process', () => {
  it(
    'times each activity and counts a finished rollout set by status and failure class',
    { timeout: 300_000 },
    async () => {
      const taskQueue = `worker-metrics-${randomUUID()}`;
      const metricsPort = await freePort();
      const config = path.join(dir, 'rein.json');
      writeFileSync(
        config,
        JSON.stringify({
          dataDir: path.join(dir, 'data'),
          log: { level: 'info' },
          temporal: { address: inject('temporalAddress'), taskQueue },
          gateway: { publicUrl: t.gateway.url },
          worker: { metricsPort },
          harness: {
            version: 'test',
            local: { command: process.execPath, args: [harness, '{task}', '{output}'], timeoutSeconds: 60 },
          },
          verifier: {
            command: process.execPath,
            args: [path.join(root, 'examples/calculator-agent/verifier.mjs'), '{task}', '{output}'],
          },
          rollouts: { concurrency: 2, maxAttempts: 1 },
        }),
      );
      worker = startRein(['worker', '--config', config], {
        env: { REIN_GATEWAY_ADMIN_KEY: ADMIN_KEY, TEMPORAL_ADDRESS: undefined },
      });
      await worker.waitFor(/Worker polling task queue/, 120_000);
      const url = `http://127.0.0.1:${metricsPort}/metrics`;
      expect(worker.output().stdout).toContain(`Metrics at ${url}`);

      const before = await scrape(url);
      expect(before.status).toBe(200);
      expect(familiesOf(before.text).get('rein_worker_activity_duration_seconds')).toBe('histogram');
      expect(valueOf(before.samples, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status).toBe(404);

      const { client, connection } = await testClient();
      let summary: RunRolloutsSummary;
      try {
        summary = await client.workflow.execute('rolloutSet', {
          taskQueue,
          workflowId: `worker-metrics-${randomUUID()}`,
          args: [
            {
              batchId: 'metrics',
              taskSet: { file: taskFile, sha256: taskSetHash(tasks) },
              taskIds: tasks.map((task) => task.id),
              samplesPerTask: 2,
              mode: 'train',
              policyVersion: 'policy-v1',
            },
          ],
        });
      } finally {
        await connection.close();
      }
      expect(summary.total).toBe(8);
      expect(summary.byFailureClass.harness).toBe(2);

      const after = (await scrape(url)).samples;
      for (const [status, n] of Object.entries(summary.byStatus)) {
        expect(valueOf(after, 'rein_worker_rollouts_total', { mode: 'train', status }), status).toBe(n);
      }
      expect(valueOf(after, 'rein_worker_rollout_failures_total', { mode: 'train', failure_class: 'harness' })).toBe(2);
      expect(
        valueOf(after, 'rein_worker_activity_duration_seconds_count', { activity: 'runRollouts', outcome: 'ok' }),
      ).toBe(1);
      expect(
        valueOf(after, 'rein_worker_activity_duration_seconds_sum', { activity: 'runRollouts', outcome: 'ok' }),
      ).toBeGreaterThan(0);
      expect(valueOf(after, 'rein_worker_activities_running', { activity: 'runRollouts' })).toBe(0);
    },
  );
});
