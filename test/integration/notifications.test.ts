import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Activities } from '../../activities/index.js';
import { createNotifyActivities } from '../../activities/notify.js';
import { notificationsSchema } from '../../src/notify/events.js';
import { signature } from '../../src/notify/webhook.js';
import type { RunStatus, TrainingRunInput } from '../../workflows/index.js';
import { withStubWorker } from '../helpers/run-stubs.js';
import { startReceiver, type Received, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { withRolloutIds } from '../../activities/batch-selection.js';

/**
 * Webhook notifications through the real workflows, the real notify activity and Temporal's
 * retries on the shared dev server, to a receiver that is a real HTTP server. The other
 * activities are stubs: which verdict the gate gives and whether training fails is the test's choice.
 */

const SECRET = 'webhook-secret-for-tests';
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startReceiver();
  process.env.REIN_TEST_WEBHOOK_SECRET = SECRET;
  process.env.REIN_TEST_WEBHOOK_AUTH = 'Bearer receiver-token';
});
afterAll(async () => {
  await receiver?.close();
});

type Stubbed = Pick<
  Activities,
  | 'registerBasePolicy'
  | 'productionPolicy'
  | 'runRollouts'
  | 'buildBatch'
  | 'updatePolicy'
  | 'gateCandidate'
  | 'promotePolicy'
  | 'recordLedgerEntry'
>;

/** Stubs whose gate gives `verdicts[iteration - 1]`, and whose trainer refuses `failAt`'s batch. */
function stubs(verdicts: Array<'pass' | 'fail'>, failAt?: number): Stubbed {
  let production: string | undefined;
  return {
    async registerBasePolicy() {},
    async productionPolicy(input) {
      production ??= input.base.version;
      return production;
    },
    async runRollouts(input) {
      const total = input.taskIds.length * input.samplesPerTask;
      return {
        batchId: input.batchId,
        harnessVersion: 'stub',
        total,
        byStatus: { succeeded: total },
        byFailureClass: {},
        meanReward: 0.5,
        unscored: 0,
        rewardDisagreements: 0,
        meanRewardByTask: Object.fromEntries(input.taskIds.map((t) => [t, 0.5])),
      };
    },
    async buildBatch(input) {
      const artifact = (name: string) => ({ uri: `file:///stub/${name}`, sha256: 'sha', bytes: 1 });
      return {
        batch: { ...artifact('batch'), contentHash: `content-${input.iteration}` },
        report: artifact('report'),
        summary: {
          rolloutsUsed: withRolloutIds(input).rolloutIds.length,
          rolloutsExcluded: 0,
          sequences: 1,
          trainedTokens: 1,
          meanReward: 0.5,
          mergeRate: 1,
          driftRate: 0,
        },
      };
    },
    async updatePolicy(input) {
      if (input.iteration === failAt)
        throw ApplicationFailure.nonRetryable(
          `trainer refused the batch of iteration ${input.iteration}`,
          'PolicyUpdateError',
        );
      return {
        version: input.newVersion,
        parent: input.parentVersion,
        checkpointUri: `file:///stub/${input.newVersion}`,
        steps: 1,
        approxKl: 0,
        clipFraction: 0,
        reused: false,
        seconds: 0,
      };
    },
    async gateCandidate(input) {
      const iteration = Number(/\.v(\d+)$/.exec(input.candidate)?.[1] ?? 0);
      const verdict = verdicts[iteration - 1] ?? 'fail';
      return {
        decisionId: input.decisionId,
        verdict,
        reasons: [`stub gate says ${verdict}`],
        acceptedRate: { incumbent: 0.4, candidate: verdict === 'pass' ? 0.6 : 0.3 },
      };
    },
    async promotePolicy(input) {
      const from = production ?? null;
      production = input.version;
      return { from, to: input.version, gatewayUpdated: true };
    },
    async recordLedgerEntry() {},
  };
}

const webhookConfig = (events?: string[]) =>
  notificationsSchema.parse({
    webhook: {
      url: receiver.url,
      secretEnv: 'REIN_TEST_WEBHOOK_SECRET',
      headersFromEnv: { Authorization: 'REIN_TEST_WEBHOOK_AUTH' },
      ...(events && { events }),
    },
    temporalUiUrl: 'http://temporal-ui.test:8233/',
  });

/** Runs a training run to its end on a worker with the real workflows, the real notify activity and these stubs. */
async function run(activities: Stubbed, more: Partial<TrainingRunInput> = {}, notifications = webhookConfig()) {
  const runId = `notify-run-${randomUUID().slice(0, 8)}`;
  const { notify } = createNotifyActivities({ notifications });
  const input: TrainingRunInput = {
    runId,
    configHash: 'cfg',
    base: { version: 'v0', checkpointUri: 'file:///stub/v0' },
    startFrom: 'base',
    iterations: 2,
    train: {
      taskSet: { file: '/stub/train.jsonl', sha256: 'sha' },
      taskIds: ['t1', 't2'],
      tasksPerIteration: 2,
      samplesPerTask: 1,
    },
    heldout: { taskSet: { file: '/stub/heldout.jsonl', sha256: 'sha' }, taskIds: ['h1'] },
    release: { samplesPerTask: 1, promote: true },
    onFailedIteration: 'stop',
    ...more,
  };
  const outcome = await withStubWorker({ ...activities, notify }, ({ client, taskQueue }) =>
    client.workflow.execute('trainingRun', { taskQueue, workflowId: runId, args: [input] }).then(
      (status: RunStatus) => ({ status, error: undefined }),
      (error: unknown) => ({ status: undefined, error }),
    ),
  );
  return { runId, ...outcome };
}

describe('webhook notifications from training runs', () => {
  it(
    'sends a promotion and a refusal with the verdict, reasons, versions and links, signed and with the configured headers',
    { timeout: 120_000 },
    async () => {
      receiver.reset();
      const { runId, status } = await run(stubs(['pass', 'fail']));
      expect(status).toMatchObject({ state: 'finished' });
      expect(receiver.received.map((r) => r.body.event)).toEqual(['promotion', 'refusal']);
      const [promotion, refusal] = receiver.received as [Received, Received];
      expect(promotion.body).toMatchObject({
        event: 'promotion',
        runId,
        iteration: 1,
        versions: { candidate: `${runId}.v1`, incumbent: 'v0', production: `${runId}.v1` },
        verdict: 'pass',
        reasons: ['stub gate says pass'],
        heldout: { incumbent: 0.4, candidate: 0.6 },
        actor: `run:${runId}`,
        links: {
          workflow: expect.stringMatching(/^http:\/\/temporal-ui\.test:8233\/namespaces\/default\/workflows\/.+/),
        },
      });
      expect(promotion.body.decisionId).toEqual(expect.any(String));
      expect(new Date(promotion.body.at).getTime()).toBeGreaterThan(0);
      expect(refusal.body).toMatchObject({
        event: 'refusal',
        runId,
        iteration: 2,
        versions: { candidate: `${runId}.v2`, incumbent: `${runId}.v1`, production: `${runId}.v1` },
        verdict: 'fail',
        reasons: ['stub gate says fail'],
      });
      for (const r of receiver.received) {
        expect(r.headers['content-type']).toBe('application/json');
        expect(r.headers['x-rein-event']).toBe(r.body.event);
        expect(r.headers['x-rein-delivery']).toBe(r.body.id);
        expect(r.headers.authorization).toBe('Bearer receiver-token');
        expect(r.headers['x-rein-signature']).toBe(`sha256=${signature(SECRET, r.text)}`);
      }
    },
  );

  it(
    'retries a receiver that fails twice (Temporal backs off), and it gets the same delivery three times, the last taken',
    { timeout: 120_000 },
    async () => {
      receiver.reset();
      receiver.failing(2);
      const { status } = await run(stubs(['pass']), { iterations: 1 });
      expect(status).toMatchObject({ state: 'finished' });
      expect(receiver.received.map((r) => r.answered)).toEqual([503, 503, 204]);
      expect(new Set(receiver.received.map((r) => r.headers['x-rein-delivery'])).size).toBe(1);
      expect(new Set(receiver.received.map((r) => r.text)).size).toBe(1);
      expect(receiver.received[0]?.body.event).toBe('promotion');
    },
  );

  it('tells about a failed run with its root cause, and only the events configured', { timeout: 120_000 }, async () => {
    receiver.reset();
    const { runId, error } = await run(stubs(['fail', 'pass'], 2), {}, webhookConfig(['run_failed']));
    expect(error).toBeInstanceOf(WorkflowFailedError);
    // The refusal of iteration 1 was not asked for.
    expect(receiver.received.map((r) => r.body.event)).toEqual(['run_failed']);
    expect(receiver.received[0]?.body).toMatchObject({
      runId,
      iteration: 2,
      versions: { parent: `${runId}.v1` },
      error: expect.stringContaining('trainer refused the batch of iteration 2'),
    });
  });

  it(
    'never fails the run when the receiver stays down: the run finishes, every try was made',
    { timeout: 180_000 },
    async () => {
      receiver.reset();
      receiver.failing(Infinity);
      const { status } = await run(stubs(['pass']), { iterations: 1 });
      expect(status).toMatchObject({ state: 'finished' });
      expect(receiver.received.map((r) => r.answered)).toEqual(Array(6).fill(503));
    },
  );
});
