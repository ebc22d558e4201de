import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, startRun, trainingRunInput } from '../../src/client/runs.js';
import { loadConfig } from '../../src/config/load.js';
import { gatewayOptions } from '../../src/gateway/from-config.js';
import { startGateway, type Gateway } from '../../src/gateway/server.js';
import { policyServerKey } from '../../src/policy/admin-key.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { traceStoreFromConfig } from '../../src/store/open.js';
import type { TraceStore } from '../../src/store/trace-store.js';
import { runRein, startRein, type RunningRein } from '../helpers/cli.js';
import { reinInProcessWith } from '../helpers/cli-in-process.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { testClient } from '../helpers/temporal.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-cli-status-'));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined };
let configFile: string;
let taskQueue: string;
let store: TraceStore;
let gateway: Gateway;
let policyServer: PolicyServer;
let worker: RunningRein;
const rein = (...args: string[]) => runRein(['--config', configFile, ...args], { env });
// Each test starts its runs with a real `rein` process, as a user does; the commands that read them run through the
// CLI's own entry point in this process, one at a time (a child process's start-up is seconds on a busy machine).
const here = (...args: string[]) => reinInProcessWith(env, '--config', configFile, ...args);

// One `rein worker` serves every run here; the gateway and the policy server stay up in this process.
beforeAll(async () => {
  ({ file: configFile, taskQueue } = await writeExampleConfig(
    dir,
    { iterations: 1, tasksPerIteration: 2, samplesPerTask: 2, heldoutLimit: 4 },
    // No candidate can gain more than 100 points: every gate refuses, so production stays at the base.
    {
      samples: { zeroVarianceGroups: 'keep' },
      gate: {
        autoPromote: true,
        gain: { test: 'mcnemar', minGain: 1 },
        maxRegression: { tokens: 1.0, steps: 1.0, latency: null },
      },
    },
  ));
  const { config } = loadConfig({ file: configFile, env: {} });
  policyServer = await startPolicyServer({
    host: '127.0.0.1',
    port: config.policyServer.port,
    models: { v0: config.run.base.checkpoint as string },
    adminKey: policyServerKey(config.dataDir),
  });
  store = await traceStoreFromConfig(config);
  gateway = await startGateway(gatewayOptions(config.gateway, store, {}).options, {
    host: '127.0.0.1',
    port: config.gateway.port,
  });
  worker = startRein(['--config', configFile, 'worker'], { env });
  await worker.waitFor(/Worker polling task queue/, 120_000);
}, 180_000);
afterAll(async () => {
  await worker?.stop('SIGTERM');
  await gateway?.close();
  await store?.close();
  await policyServer?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('honest status of a run whose candidates the gate refuses', () => {
  it(
    'reports production as final, the last candidate apart, every release in the ledger, the decisions, the policies, and summaries for the Web UI',
    { timeout: 400_000 },
    async () => {
      const runId = 'refused-1';
      const train = await rein('train', '--run-id', runId, '--iterations', '2', '--follow');
      expect(train.code, `${train.stdout}\n${train.stderr}`).toBe(0);
      expect(train.stdout).toMatch(/iteration 2: refused-1\.v2 .*gate FAIL against v0/);
      // The header names what production serves as the run starts (the registry's alias, the base here).
      expect(train.stdout).toContain('samples from production (v0 now);');

      const status = await here('status', runId);
      const ledger = await here('ledger', '--run', runId);
      const decisions = await here('decisions', '--run', runId);
      const policies = await here('policies', '--run', runId, '--wide');
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/^final +v0 +\d+\.\d% +\d\.\d{3} +\S+ +production$/m);
      expect(status.stdout).toMatch(
        /^last candidate +refused-1\.v2 +\d+\.\d% +\d\.\d{3} +\S+ +not promoted \(gate fail\)$/m,
      );
      // Production is still the base: the comparison is the last candidate's, never the base against itself.
      expect(status.stdout).toMatch(/^last candidate refused-1\.v2 against the base v0: \d+ tasks gained, \d+ lost/m);

      expect(ledger.stdout).toMatch(/^release\.refused-1\.v1 +release +refused-1\.v1 .* fail$/m);
      expect(ledger.stdout).toMatch(/^release\.refused-1\.v2 +release +refused-1\.v2 .* fail$/m);

      expect(decisions.code, decisions.stderr).toBe(0);
      const rows = decisions.stdout.split('\n').filter((l) => l.includes('refused-1.v'));
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatch(/refused-1\.v2 +v0 +FAIL +\d+\.\d% → \d+\.\d% +\+\d+ −\d+ +not promoted/);

      expect(policies.stdout).toMatch(
        /^refused-1\.v1 +- +v0 +refused \(gate fail\) +full +refused-1 +1 +\w+ +\d+\.\d% \(production v0 \d+\.\d%\) +loss [-\d.e]+, approxKl [-\d.e]+, clipFraction [-\d.e]+/m,
      );

      // On an 80-column terminal every listing fits it, saying what it left out.
      for (const args of [
        ['runs'],
        ['status', runId],
        ['decisions', '--run', runId],
        ['policies', '--run', runId],
        ['ledger', '--run', runId],
      ]) {
        const narrow = await reinInProcessWith({ ...env, COLUMNS: '80' }, '--config', configFile, ...args);
        expect(narrow.code, narrow.stderr).toBe(0);
        for (const line of narrow.stdout.split('\n'))
          expect(line.length, `rein ${args.join(' ')}: ${line}\n${narrow.stdout}`).toBeLessThanOrEqual(80);
      }

      const { client, connection } = await testClient();
      try {
        const run = client.workflow.getHandle(runId);
        const { currentDetails } = await run.query<{ currentDetails: string }>('__temporal_workflow_metadata');
        expect(currentDetails.split('\n')).toEqual([
          expect.stringMatching(
            /^it1: refused-1\.v1 train reward \d\.\d{3}; gate FAIL \d+\.\d% → \d+\.\d%, not promoted$/,
          ),
          expect.stringMatching(/^it2: refused-1\.v2 /),
        ]);
        expect(await (await client.workflow.getHandle(`${runId}-it2`).describe()).staticSummary()).toBe(
          'it2: train refused-1.v1 on 2 tasks x 2, then the held-out gate',
        );
        const release = await client.workflow.getHandle(`${runId}-it2-release`).describe();
        expect(release.searchAttributes.ReinHeldoutSuccess).toEqual([expect.any(Number)]);
        const withSuccess: string[] = [];
        for await (const wf of client.workflow.list({ query: `ReinRunId = '${runId}' AND ReinHeldoutSuccess >= 0` }))
          withSuccess.push(wf.workflowId);
        expect(withSuccess.sort()).toEqual([
          runId,
          `${runId}-it1`,
          `${runId}-it1-release`,
          `${runId}-it2`,
          `${runId}-it2-release`,
        ]);
      } finally {
        await connection.close();
      }
    },
  );
});

describe('honest status of failed and cancelled runs', () => {
  it(
    'says failed with the root cause (exit 1), cancels at once and says cancelled, follows again, and lists runs newest first',
    { timeout: 400_000 },
    async () => {
      const { client, connection } = await testClient();
      let follower: RunningRein | undefined;
      try {
        // A long run, started first and ended last.
        expect(
          (await rein('train', '--run-id', 'cancel-1', '--iterations', '5', '--tasks', '8', '--samples', '4')).code,
        ).toBe(0);
        // A run whose training task set no longer has the content it pinned: it fails for a reason `rein status` must
        // name.
        const { config } = loadConfig({ file: configFile, env: {} });
        const input = trainingRunInput(config, { iterations: 1, tasksPerIteration: 2, samplesPerTask: 2 });
        await startRun(
          client,
          taskQueue,
          {
            ...input,
            heldout: undefined,
            runId: 'fail-1',
            train: { ...input.train, taskSet: { ...input.train.taskSet, sha256: 'the-hash-it-had' } },
          },
          config,
        );
        const failed = await client.workflow
          .getHandle('fail-1')
          .result()
          .catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(Error);

        // Followed again from another process (starting while fail-1's status is read), then cancelled
        // in the middle of an iteration: the iteration is read just before the cancel, while its rollouts
        // seem far from done (one read earlier may have finished meanwhile, and a finished workflow is not cancelled).
        follower = startRein(['--config', configFile, 'status', 'cancel-1', '--follow'], { env });

        const status = await here('status', 'fail-1');
        expect(status.code).toBe(1);
        expect(status.stdout).toMatch(
          /^run fail-1: failed \(.*iteration 1 of run fail-1 failed: .*task set .*train\.jsonl changed: sha256 \w+, the run pinned the-hash-it-had/m,
        );

        await follower.waitFor(/iteration \d+: training rollouts/);
        let iterationWorkflow: string | undefined;
        while (!iterationWorkflow) {
          const { activity, execution } = await describeRun(client, 'cancel-1');
          expect(execution).toBe('RUNNING');
          const done = activity?.done ?? 0;
          if (
            activity?.type === 'runRollouts' &&
            activity.stage === 'rollouts' &&
            done >= 1 &&
            done <= (activity.total ?? 32) - 8
          )
            iterationWorkflow = activity.workflowId;
          else await new Promise((r) => setTimeout(r, 100));
        }
        const cancelled = await here('cancel', 'cancel-1');
        expect(cancelled.code, cancelled.stderr).toBe(0);
        expect(cancelled.stdout).toBe('run cancel-1 cancelled\n');
        expect((await client.workflow.getHandle('cancel-1').describe()).status.name).toBe('CANCELLED');
        expect((await client.workflow.getHandle(iterationWorkflow).describe()).status.name).toBe('CANCELLED');
        expect(await follower.exited).toBe(1);
        expect(follower.output().stdout).toMatch(/^run cancel-1: cancelled/m);
        const iteration = Number(/-it(\d+)$/.exec(iterationWorkflow)?.[1]);
        const after = await here('status', 'cancel-1');
        const policies = await here('policies', '--run', 'cancel-1');
        const listed = await here('runs', '--limit', '200');
        const cancelledRuns = await here('runs', '--execution', 'CANCELLED', '--search', 'CANCEL-');
        expect(after.code).toBe(1);
        expect(after.stdout).toMatch(/^run cancel-1: cancelled/);
        // The API's and the console's state say so too, not what the run was doing when cancelled.
        expect((await describeRun(client, 'cancel-1')).status?.state).toBe('cancelled');
        // It stopped in the middle of the iteration: that iteration's candidate, if its update had
        // registered one before the cancel (progress is read from heartbeats, which lag), was never gated.
        const candidate = policies.stdout.split('\n').find((l) => l.startsWith(`cancel-1.v${iteration} `));
        expect(candidate ?? 'not registered').toMatch(/^not registered$| not gated /);

        // Newest first by start: fail-1 started after cancel-1, though it ended before it.
        const runs = listed.stdout.split('\n');
        const at = (id: string) => runs.findIndex((l) => l.startsWith(`${id} `));
        expect(runs[at('fail-1')]).toMatch(/^fail-1 +failed /);
        expect(runs[at('cancel-1')]).toMatch(/^cancel-1 +cancelled /);
        expect(at('fail-1')).toBeLessThan(at('cancel-1'));
        // Filtered by execution status and by text in the id (any case).
        expect(cancelledRuns.stdout).toMatch(/^cancel-1 +cancelled /m);
        expect(cancelledRuns.stdout).not.toMatch(/^fail-1 /m);
      } finally {
        await follower?.stop('SIGTERM');
        await connection.close();
      }
    },
  );
});
