import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BatchV1Api, CoreV1Api, KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { loadConfig } from '../../src/config/load.js';
import type { HarnessExecutor } from '../../src/rollouts/executor.js';
import { harnessExecutor } from '../../src/rollouts/harness-executor.js';
import { harnessVersion } from '../../src/rollouts/harness-spec.js';
import { kubernetesExecutor } from '../../src/rollouts/kubernetes/job-executor.js';
import {
  jobNameFor,
  kubernetesHarnessSchema,
  renderJob,
  type KubernetesHarnessSettings,
} from '../../src/rollouts/kubernetes/job-template.js';
import {
  RolloutSetupError,
  RolloutsHandedBack,
  runRollouts,
  type RolloutBatchSpec,
  type VerifierSpec,
} from '../../src/rollouts/runner.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startKubeControlPlane, type KubeControlPlane } from '../helpers/kube-control-plane.js';
import { startKubeFaultProxy } from '../helpers/kube-fault-proxy.js';
import { eventually, podsIn, workerNamespace } from '../helpers/kube-worker.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent/node-agent.js';

/**
 * Rollouts as Kubernetes Jobs on the real control plane (etcd, kube-apiserver,
 * kube-controller-manager: the real Job controller and garbage collector) with the node agent
 * as the kubelet. Every Job comes from the example's own kubernetes/job.yaml, and the worker
 * authenticates as the `rein-worker` ServiceAccount bound to exactly the example's rbac.yaml Role.
 * What a harness does is chosen by its image: the node agent's image map runs each as a local
 * process (the example's image runs harness.mjs, as its Dockerfile's ENTRYPOINT does).
 */
const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const jobYaml = path.join(example, 'kubernetes', 'job.yaml');
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-kube-rollouts-'));
const launches = path.join(dir, 'launches.log');
const script = (name: string, code: string) => {
  const file = path.join(dir, `${name}.mjs`);
  writeFileSync(file, code);
  return file;
};
const IMAGES = {
  example: 'registry.example/calculator-agent:test',
  crash: 'registry.example/crashes:1',
  hang: 'registry.example/hangs:1',
  counting: 'registry.example/counting:1',
};
const node = (file: string) => ({ entrypoint: [process.execPath, file] });

let t: TestGateway;
let gateway: GatewayControlClient;
let plane: KubeControlPlane;
let agent: NodeAgent;
const executors: HarnessExecutor[] = [];

beforeAll(async () => {
  t = await startTestGateway();
  gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
  plane = await startKubeControlPlane();
  agent = await startNodeAgent(plane, {
    images: {
      [IMAGES.example]: node(path.join(example, 'harness.mjs')),
      [IMAGES.crash]: node(script('crash', 'console.error("tool exploded"); process.exit(3);')),
      [IMAGES.hang]: node(script('hang', 'setInterval(() => {}, 1000);')),
      // Records each launch, takes 2 s, then runs the example agent.
      [IMAGES.counting]: {
        ...node(path.join(fixtures, 'counting.mjs')),
        env: { LAUNCH_LOG: launches, LAUNCH_DELAY_MS: '2000' },
      },
    },
  });
}, 120_000);
afterAll(async () => {
  await agent?.close();
  await plane?.close();
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const executor of executors.splice(0)) await executor.close?.();
});

let namespaces = 0;
/** A namespace of its own with the example's RBAC, and an executor working in it as the worker's ServiceAccount. */
async function setup(
  overrides: Partial<KubernetesHarnessSettings> = {},
  kubeConfig?: (worker: KubeConfig) => KubeConfig,
) {
  const namespace = `rollouts-${++namespaces}`;
  const worker = await workerNamespace(plane, namespace);
  const settings = kubernetesHarnessSchema.parse({
    template: jobYaml,
    image: IMAGES.example,
    namespace,
    timeoutSeconds: 30,
    ...overrides,
  });
  const harness = kubernetesExecutor(settings, { kubeConfig: kubeConfig ? kubeConfig(worker) : worker });
  executors.push(harness);
  const workerBatch = worker.makeApiClient(BatchV1Api);
  return {
    harness,
    namespace,
    worker,
    settings,
    jobs: async () => (await workerBatch.listNamespacedJob({ namespace })).items,
  };
}
/** Another executor on the same settings and credentials: the next worker's. */
function setupExecutor(settings: KubernetesHarnessSettings, worker: KubeConfig): HarnessExecutor {
  const harness = kubernetesExecutor(settings, { kubeConfig: worker });
  executors.push(harness);
  return harness;
}
const verifier: VerifierSpec = {
  command: process.execPath,
  args: [path.join(example, 'verifier.mjs'), '{task}', '{output}'],
  timeoutMs: 20_000,
};
const batch = (overrides: Partial<RolloutBatchSpec>): RolloutBatchSpec => ({
  batchId: 'k',
  tasks: [{ id: 't', question: '6*7', answer: 42 }],
  samplesPerTask: 1,
  mode: 'train',
  policyVersion: 'policy-v1',
  hiddenFields: ['answer'],
  rewardWeights: { success: 1 },
  concurrency: 4,
  maxAttempts: 2,
  workDir: dir,
  ...overrides,
});
const launched = (rolloutId: string) =>
  existsSync(launches)
    ? readFileSync(launches, 'utf8')
        .split('\n')
        .filter((l) => l.startsWith(`${rolloutId} `))
    : [];

describe('rollouts as Kubernetes Jobs on the real control plane', { timeout: 120_000 }, () => {
  it("runs each rollout as a Job from the example's job.yaml, as the worker's ServiceAccount with only the example's Role", async () => {
    const { harness, namespace, jobs } = await setup({ timeoutSeconds: 20 });
    // Two pods fit on the node: the others wait Unschedulable, and waiting does not count against their timeout.
    agent.setMaxPods(2);
    try {
      const tasks = Array.from({ length: 3 }, (_, i) => ({ id: `m${i}`, question: `${i + 2}*7`, answer: (i + 2) * 7 }));
      const outcomes = await runRollouts(batch({ batchId: 'jobs', tasks, samplesPerTask: 2, concurrency: 4 }), {
        gateway,
        harness,
        verifier,
      });
      expect(outcomes.map((o) => [o.status, o.reward, o.attempts])).toEqual(Array(6).fill(['succeeded', 1, 1]));
    } finally {
      agent.setMaxPods(110);
    }
    expect((await jobs()).length).toBe(6);
    const output = JSON.parse(readFileSync(path.join(dir, 'jobs.m0.1', 'attempt-1', 'output.json'), 'utf8'));
    expect(output).toMatchObject({ taskId: 'm0', answer: expect.stringContaining('14') });
    expect(await t.store.listCalls('jobs.m0.1')).toHaveLength(2);
    // The Job as the apiserver keeps it: the rollout's identity, Rein's settings and the template's, the real Job
    // controller's pod.
    const job = (await jobs()).find((j) => j.metadata?.name === jobNameFor('jobs.m0.1', 1));
    expect(job?.metadata?.annotations?.['rein.dev/rollout-id']).toBe('jobs.m0.1');
    expect(job?.metadata?.labels).toMatchObject({
      'app.kubernetes.io/name': 'calculator-agent',
      'app.kubernetes.io/managed-by': 'rein',
    });
    expect(job?.spec).toMatchObject({
      backoffLimit: 0,
      ttlSecondsAfterFinished: 3600,
      template: { spec: { restartPolicy: 'Never', serviceAccountName: 'rein-harness' } },
    });
    expect(job?.status?.conditions?.find((c) => c.type === 'Complete')?.status).toBe('True');
    const env = Object.fromEntries((job?.spec?.template.spec?.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
    expect(JSON.parse(env.REIN_TASK as string)).toEqual({ id: 'm0', question: '2*7' }); // no answer
    expect(env).toMatchObject({
      REIN_ROLLOUT_ID: 'jobs.m0.1',
      REIN_ATTEMPT: '1',
      OPENAI_BASE_URL: expect.stringContaining(t.gateway.url),
    });
    const [pod] = await podsIn(plane, namespace, `job-name=${jobNameFor('jobs.m0.1', 1)}`);
    expect(pod?.metadata?.name).toMatch(new RegExp(`^${jobNameFor('jobs.m0.1', 1)}-[a-z0-9]{5}$`));
    expect(pod?.status?.containerStatuses?.[0]?.state?.terminated?.message).toContain('"taskId":"m0"');
  });

  it('classifies a crash (with the log tail), a hang past the timeout, an image that cannot be pulled and a pod that never starts', async () => {
    const crash = await setup({ image: IMAGES.crash });
    const [crashed] = await runRollouts(batch({ batchId: 'k-crash' }), { gateway, harness: crash.harness, verifier });
    expect(crashed).toMatchObject({
      status: 'failed',
      failureClass: 'harness',
      reward: 0,
      reason: expect.stringContaining('exited with 3: tool exploded'),
    });
    const crashEvidence = (await t.store.listEvents('k-crash.t.0')).find((e) => e.payload.to === 'failed')?.payload
      .evidence;
    expect(crashEvidence).toMatchObject({
      exitCode: 3,
      job: jobNameFor('k-crash.t.0', 1),
      pod: expect.stringMatching(/^rein-/),
      node: agent.nodeName,
      logTail: expect.stringContaining('tool exploded'),
    });

    const hang = await setup({ image: IMAGES.hang, timeoutSeconds: 1 });
    const [hung] = await runRollouts(batch({ batchId: 'k-hang' }), { gateway, harness: hang.harness, verifier });
    expect(hung).toMatchObject({ status: 'failed', failureClass: 'timeout', reward: 0 });
    // Rein deleted the Job; the garbage collector deleted its pod, and the node agent killed it.
    await eventually(
      async () => (await hang.jobs()).length === 0 && (await podsIn(plane, hang.namespace)).length === 0,
    );

    const unpullable = await setup({ image: 'registry.example/no-such-image:1' });
    const [pull] = await runRollouts(batch({ batchId: 'k-pull' }), { gateway, harness: unpullable.harness, verifier });
    // The image is the spec's problem: not the policy's, and not retried.
    expect(pull).toMatchObject({
      status: 'failed',
      failureClass: 'environment',
      attempts: 1,
      reward: null,
      reason: expect.stringMatching(/cannot start: ErrImagePull: .*no-such-image/),
    });
    await eventually(async () => (await unpullable.jobs()).length === 0);

    const stuck = await setup({ pendingTimeoutSeconds: 1 });
    agent.setMaxPods(0);
    try {
      const [pending] = await runRollouts(batch({ batchId: 'k-pending', maxAttempts: 2 }), {
        gateway,
        harness: stuck.harness,
        verifier,
      });
      expect(pending).toMatchObject({
        status: 'failed',
        failureClass: 'infrastructure',
        attempts: 2,
        reason: expect.stringContaining('did not start within 1 s (Unschedulable: 0/1 nodes are available'),
      });
    } finally {
      agent.setMaxPods(110);
    }
    await eventually(
      async () => (await stuck.jobs()).length === 0 && (await podsIn(plane, stuck.namespace)).length === 0,
    );

    // No harness ServiceAccount: the Job controller cannot create the pod, and says why only in its events.
    const noAccount = await setup({ pendingTimeoutSeconds: 1 });
    await plane
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .deleteNamespacedServiceAccount({ namespace: noAccount.namespace, name: 'rein-harness' });
    const [nothing] = await runRollouts(batch({ batchId: 'k-no-pod', maxAttempts: 1 }), {
      gateway,
      harness: noAccount.harness,
      verifier,
    });
    const job = jobNameFor('k-no-pod.t.0', 1);
    expect(nothing).toMatchObject({ status: 'failed', failureClass: 'infrastructure' });
    expect(nothing?.reason).toContain(
      `did not start within 1 s (no pod was created: \`kubectl describe job ${job} -n ${noAccount.namespace}\` shows why`,
    );
  });

  it('retries an evicted pod as a new attempt, and rides out an API server that fails a request', async () => {
    const proxy = await startKubeFaultProxy(plane);
    try {
      const { harness, namespace, jobs } = await setup({ image: IMAGES.counting }, (worker) =>
        proxy.kubeConfig(worker),
      );
      proxy.failNext(1, 503, (req) => req.method === 'POST' && req.url.includes('/jobs'));
      const running = runRollouts(batch({ batchId: 'k-evict' }), { gateway, harness, verifier });
      // Evicted mid-run: once the harness has started working.
      await eventually(() => launched('k-evict.t.0').length === 1);
      const pod = await eventually(
        async () =>
          (await podsIn(plane, namespace, `job-name=${jobNameFor('k-evict.t.0', 1)}`)).find(
            (p) => p.status?.phase === 'Running',
          )?.metadata?.name,
      );
      await agent.evictPod(namespace, pod);
      const [outcome] = await running;
      expect(outcome).toMatchObject({ status: 'succeeded', reward: 1, attempts: 2 });
      expect(launched('k-evict.t.0')).toEqual(['k-evict.t.0 1', 'k-evict.t.0 2']);
      const retried = (await t.store.listEvents('k-evict.t.0')).find(
        (e) => e.type === 'custom' && e.payload.name === 'attempt_failed',
      );
      expect(retried?.payload.data).toMatchObject({
        attempt: 1,
        failureClass: 'infrastructure',
        reason: expect.stringContaining('Evicted'),
      });
      expect(proxy.failed()).toBe(1);
      expect((await jobs()).map((j) => j.metadata?.name).sort()).toEqual([
        jobNameFor('k-evict.t.0', 1),
        jobNameFor('k-evict.t.0', 2),
      ]);
    } finally {
      await proxy.close();
    }
  });

  it('deletes the Jobs and their pods on cancel', async () => {
    const hang = await setup({ image: IMAGES.hang });
    const controller = new AbortController();
    const cancelled = runRollouts(batch({ batchId: 'k-cancel', samplesPerTask: 3 }), {
      gateway,
      harness: hang.harness,
      verifier,
      signal: controller.signal,
    });
    await eventually(
      async () => (await podsIn(plane, hang.namespace)).filter((p) => p.status?.phase === 'Running').length === 3,
    );
    controller.abort();
    expect((await cancelled).map((o) => o.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    // Deleted with propagation Background: the garbage collector deletes the pods, the node agent kills them.
    await eventually(
      async () => (await hang.jobs()).length === 0 && (await podsIn(plane, hang.namespace)).length === 0,
    );
    expect(agent.runningPods()).toBe(0);
  });

  it('follows the Job of a worker process killed mid-Job (SIGKILL) instead of launching another', async () => {
    const { namespace, worker, settings, jobs } = await setup({ image: IMAGES.counting });
    const specFile = path.join(dir, 'killed-worker.json');
    writeFileSync(
      specFile,
      JSON.stringify({
        gatewayUrl: t.gateway.url,
        adminKey: ADMIN_KEY,
        kubeconfig: worker.exportConfig(),
        settings,
        batch: batch({ batchId: 'k-killed' }),
        verifier,
      }),
    );
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const child = spawn(
      process.execPath,
      ['--import', tsx, path.resolve(import.meta.dirname, '../helpers/kube-rollout-worker.ts'), specFile],
      { stdio: 'ignore' },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await eventually(() => launched('k-killed.t.0').length === 1);
      child.kill('SIGKILL');
      await exited;
    } finally {
      child.kill('SIGKILL');
    }
    // The Job runs on without its worker; the next one follows it to its end.
    expect((await podsIn(plane, namespace)).map((p) => p.status?.phase)).toEqual(['Running']);
    const [outcome] = await runRollouts(batch({ batchId: 'k-killed' }), {
      gateway,
      harness: setupExecutor(settings, worker),
      verifier,
    });
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1, attempts: 1 });
    expect(launched('k-killed.t.0')).toEqual(['k-killed.t.0 1']);
    expect((await jobs()).map((j) => j.metadata?.name)).toEqual([jobNameFor('k-killed.t.0', 1)]);
  });

  it('leaves the Job running when its worker hands the rollouts back, and the next runner follows it to the end', async () => {
    const { harness, jobs } = await setup({ image: IMAGES.counting });
    const shutdown = new AbortController();
    const first = runRollouts(batch({ batchId: 'k-handback' }), {
      gateway,
      harness,
      verifier,
      signal: shutdown.signal,
      cancelIsFinal: () => false,
    });
    await eventually(() => launched('k-handback.t.0').length === 1);
    shutdown.abort();
    await expect(first).rejects.toBeInstanceOf(RolloutsHandedBack);
    expect((await jobs()).map((j) => j.metadata?.name)).toEqual([jobNameFor('k-handback.t.0', 1)]);

    const [outcome] = await runRollouts(batch({ batchId: 'k-handback' }), { gateway, harness, verifier });
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1, attempts: 1 });
    expect(launched('k-handback.t.0')).toEqual(['k-handback.t.0 1']);
    expect((await jobs()).length).toBe(1);
  });

  // Slow (about a minute): after the restart the apiserver's Node authorizer refuses the node agent's
  // status writes (403) for a while, so the pod's end reaches the API late, as a kubelet's would.
  it(
    'follows its Jobs across an apiserver restart: the watches are cut, answered 410 Gone, and list again',
    { timeout: 240_000 },
    async () => {
      // What the informers' watches receive, recorded on the way (the watches themselves are real).
      const gone: unknown[] = [];
      const watch = Watch.prototype.watch;
      const spy = vi.spyOn(Watch.prototype, 'watch').mockImplementation(function (
        this: Watch,
        p,
        query,
        onEvent,
        onDone,
      ) {
        return watch.call(
          this,
          p,
          query,
          (phase, obj, raw) => {
            if (phase === 'ERROR' && (obj as { code?: number }).code === 410) gone.push(obj);
            onEvent(phase, obj, raw);
          },
          (err) => {
            if (
              (err as { statusCode?: number; code?: number } | null)?.statusCode === 410 ||
              (err as { code?: number } | null)?.code === 410
            )
              gone.push(err);
            onDone(err);
          },
        );
      });
      try {
        const { harness, namespace } = await setup({ image: IMAGES.counting, timeoutSeconds: 200 });
        const running = runRollouts(batch({ batchId: 'k-restart' }), { gateway, harness, verifier });
        await eventually(() => launched('k-restart.t.0').length === 1);
        // Anything written after the informers' last event leaves their resourceVersion behind the restarted
        // apiserver's.
        await plane
          .kubeConfig()
          .makeApiClient(CoreV1Api)
          .createNamespacedConfigMap({ namespace, body: { metadata: { name: 'advance' } } });
        await plane.restartApiServer();
        const [outcome] = await running;
        expect(outcome, outcome?.reason ?? undefined).toMatchObject({ status: 'succeeded', reward: 1, attempts: 1 });
        expect(launched('k-restart.t.0')).toEqual(['k-restart.t.0 1']);
        expect(gone.length).toBeGreaterThan(0);
      } finally {
        spy.mockRestore();
      }
    },
  );

  it('runs from the config file: template and kubeconfig paths relative to it, the template part of the harness version', async () => {
    const { namespace, worker } = await setup();
    const configDir = mkdtempSync(path.join(dir, 'config-'));
    writeFileSync(path.join(configDir, 'kubeconfig.yaml'), worker.exportConfig());
    writeFileSync(path.join(configDir, 'job.yaml'), readFileSync(jobYaml, 'utf8'));
    writeFileSync(
      path.join(configDir, 'rein.yaml'),
      `harness:\n  version: "1.0"\n  kubernetes:\n    template: job.yaml\n    image: ${IMAGES.example}\n    namespace: ${namespace}\n    kubeconfig: kubeconfig.yaml\n    timeoutSeconds: 30\n`,
    );
    const { config } = loadConfig({ file: path.join(configDir, 'rein.yaml'), env: {} });
    const settings = config.harness as NonNullable<typeof config.harness>;
    const harness = harnessExecutor(settings);
    executors.push(harness);
    const [outcome] = await runRollouts(batch({ batchId: 'k-config', harnessVersion: harnessVersion(settings) }), {
      gateway,
      harness,
      verifier,
    });
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1 });
    expect((await t.store.getRollout('k-config.t.0'))?.metadata.harnessVersion).toBe(harnessVersion(settings));
    const before = harnessVersion(settings);
    writeFileSync(
      path.join(configDir, 'job.yaml'),
      readFileSync(path.join(configDir, 'job.yaml'), 'utf8').replace(
        'terminationGracePeriodSeconds: 10',
        'terminationGracePeriodSeconds: 2',
      ),
    );
    expect(harnessVersion(settings)).not.toBe(before);
  });

  it("refuses a template before launching anything: Rein's own message for what it checks, the apiserver's verbatim for the rest, and credentials it rejects", async () => {
    const template = (name: string, edit: (text: string) => string) => {
      const file = path.join(dir, `${name}.yaml`);
      writeFileSync(file, edit(readFileSync(jobYaml, 'utf8')));
      return file;
    };
    // restartPolicy Always: the apiserver would refuse it for a Job too, but Rein says why it must go.
    const always = await setup({
      template: template('always', (y) =>
        y.replace('      containers:', '      restartPolicy: Always\n      containers:'),
      ),
    });
    await expect(
      runRollouts(batch({ batchId: 'k-always' }), { gateway, harness: always.harness, verifier }),
    ).rejects.toThrow(/restartPolicy Always; remove it/);

    // A container name the apiserver's validation refuses: its message, verbatim, from a dry run.
    const badName = template('bad-name', (y) => y.replace('- name: harness', '- name: Harness_1'));
    const invalid = await setup({ template: badName });
    const refusal = await runRollouts(batch({ batchId: 'k-invalid' }), {
      gateway,
      harness: invalid.harness,
      verifier,
    }).catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(RolloutSetupError);
    const apiserverSays = await plane
      .kubeConfig()
      .makeApiClient(BatchV1Api)
      .createNamespacedJob({
        namespace: invalid.namespace,
        dryRun: 'All',
        body: renderJob(readFileSync(badName, 'utf8'), invalid.settings, {
          rolloutId: 'check',
          attempt: 1,
          taskId: 'check',
          env: {},
        }),
      })
      .then(
        () => 'accepted',
        (err: unknown) => JSON.parse(String((err as { body?: unknown }).body)).message as string,
      );
    expect(apiserverSays).toContain('spec.template.spec.containers[0].name: Invalid value: "Harness_1"');
    expect((refusal as Error).message).toContain(
      `the API server refuses the Job this template makes (422): ${apiserverSays}`,
    );
    expect(await invalid.jobs()).toEqual([]);
    expect(await t.store.getRollout('k-invalid.t.0')).toBeUndefined();

    const wrongToken = await setup({}, (worker) => withToken(worker, 'wrong'));
    const attempt = runRollouts(batch({ batchId: 'k-denied' }), { gateway, harness: wrongToken.harness, verifier });
    await expect(attempt).rejects.toThrow(RolloutSetupError);
    await expect(attempt).rejects.toThrow(
      new RegExp(`refused to list Jobs in namespace ${wrongToken.namespace} \\(401\\)`),
    );
    expect(await wrongToken.jobs()).toEqual([]);
  });
});

function withToken(config: KubeConfig, token: string): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromOptions({
    clusters: config.clusters,
    contexts: config.contexts,
    currentContext: config.currentContext,
    users: config.users.map((u) => ({ ...u, token })),
  });
  return copy;
}
