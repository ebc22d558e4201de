import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { loadConfig } from '../../src/config/load.js';
import type { HarnessExecutor } from '../../src/rollouts/executor.js';
import { harnessExecutor, harnessVersion } from '../../src/rollouts/harness-spec.js';
import { kubernetesExecutor } from '../../src/rollouts/kubernetes/job-executor.js';
import { jobNameFor, kubernetesHarnessSchema, renderJob, type KubernetesHarnessSettings } from '../../src/rollouts/kubernetes/job-template.js';
import { RolloutSetupError, RolloutsHandedBack, runRollouts, type RolloutBatchSpec, type VerifierSpec } from '../../src/rollouts/runner.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startKubeStandIn, type KubeStandIn } from '../helpers/kube-api-stand-in.js';

const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const IMAGE = 'registry.example/calculator-agent:test';
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-kube-'));
let t: TestGateway;
let gateway: GatewayControlClient;
let kube: KubeStandIn;
const executors: HarnessExecutor[] = [];

beforeAll(async () => {
  t = await startTestGateway();
  gateway = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  for (const executor of executors.splice(0)) await executor.close?.();
  await kube?.close();
});

/** A Job template whose container runs a Node script; on the stand-in the container runs as a local process. */
function template(name: string, script: string, extra = ''): string {
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `apiVersion: batch/v1
kind: Job
spec:
  template:
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: harness
          image: "{{image}}"
          command: [${JSON.stringify(process.execPath)}]
          args: [${JSON.stringify(script)}]
${extra}`,
  );
  return file;
}
const exampleTemplate = () => template('example', path.join(example, 'harness.mjs'));
const inline = (name: string, code: string) => {
  const script = path.join(dir, `${name}.mjs`);
  writeFileSync(script, code);
  return template(name, script);
};

async function setup(templateFile: string, overrides: Partial<KubernetesHarnessSettings> = {}, standIn: Parameters<typeof startKubeStandIn>[0] = {}) {
  kube = await startKubeStandIn({ images: [IMAGE], ...standIn });
  const settings = kubernetesHarnessSchema.parse({ template: templateFile, image: IMAGE, namespace: 'default', timeoutSeconds: 30, ...overrides });
  const executor = kubernetesExecutor(settings, { kubeConfig: kube.kubeConfig() });
  executors.push(executor);
  return executor;
}
const verifier: VerifierSpec = { command: process.execPath, args: [path.join(example, 'verifier.mjs'), '{task}', '{output}'], timeoutMs: 20_000 };
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

describe('rollouts as Kubernetes Jobs (against the API stand-in)', () => {
  it('runs each rollout as a Job through the gateway, its output from the termination message', async () => {
    // Two pods fit on the node: the others wait, and waiting does not count against their timeout.
    const harness = await setup(exampleTemplate(), { timeoutSeconds: 20 }, { maxRunningPods: 2 });
    const tasks = Array.from({ length: 3 }, (_, i) => ({ id: `m${i}`, question: `${i + 2}*7`, answer: (i + 2) * 7 }));
    const outcomes = await runRollouts(batch({ batchId: 'jobs', tasks, samplesPerTask: 2, concurrency: 4 }), { gateway, harness, verifier });
    expect(outcomes.map((o) => [o.status, o.reward, o.attempts])).toEqual(Array(6).fill(['succeeded', 1, 1]));
    expect(kube.jobsCreated()).toBe(6);
    const output = JSON.parse(readFileSync(path.join(dir, 'jobs.m0.1', 'attempt-1', 'output.json'), 'utf8'));
    expect(output).toMatchObject({ taskId: 'm0', answer: expect.stringContaining('14') });
    expect(await t.store.listCalls('jobs.m0.1')).toHaveLength(2);
    // The Job carries the rollout's identity; Kubernetes does no retries of its own.
    const batchApi = kube.kubeConfig().makeApiClient(BatchV1Api);
    const job = await batchApi.readNamespacedJob({ name: jobNameFor('jobs.m0.1', 1), namespace: 'default' });
    expect(job.metadata?.annotations?.['rein.dev/rollout-id']).toBe('jobs.m0.1');
    expect(job.spec).toMatchObject({ backoffLimit: 0, template: { spec: { restartPolicy: 'Never' } } });
    const env = Object.fromEntries((job.spec?.template.spec?.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
    expect(JSON.parse(env.REIN_TASK as string)).toEqual({ id: 'm0', question: '2*7' }); // no answer
    expect(env).toMatchObject({ REIN_ROLLOUT_ID: 'jobs.m0.1', REIN_ATTEMPT: '1', OPENAI_BASE_URL: expect.stringContaining(t.gateway.url) });
  });

  it('classifies a crash (with the log tail), a hang past the timeout, an image that cannot be pulled and a pod that never starts', async () => {
    const crash = await setup(inline('crash', 'console.error("tool exploded"); process.exit(3);'));
    const [crashed] = await runRollouts(batch({ batchId: 'k-crash' }), { gateway, harness: crash, verifier });
    expect(crashed).toMatchObject({ status: 'failed', failureClass: 'harness', reward: 0, reason: expect.stringContaining('exited with 3: tool exploded') });
    const crashEvidence = (await t.store.listEvents('k-crash.t.0')).find((e) => e.payload.to === 'failed')?.payload.evidence;
    expect(crashEvidence).toMatchObject({ exitCode: 3, job: jobNameFor('k-crash.t.0', 1), pod: expect.stringMatching(/^rein-/), logTail: expect.stringContaining('tool exploded') });
    await kube.close();

    const hang = await setup(inline('hang', 'setInterval(() => {}, 1000);'), { timeoutSeconds: 1 });
    const [hung] = await runRollouts(batch({ batchId: 'k-hang' }), { gateway, harness: hang, verifier });
    expect(hung).toMatchObject({ status: 'failed', failureClass: 'timeout', reward: 0 });
    await waitFor(() => kube.runningPods() === 0); // the Job was deleted and its container killed
    await kube.close();

    const unpullable = await setup(exampleTemplate(), { image: 'registry.example/no-such-image:1' });
    const [pull] = await runRollouts(batch({ batchId: 'k-pull' }), { gateway, harness: unpullable, verifier });
    // The image is the spec's problem: not the policy's, and not retried.
    expect(pull).toMatchObject({ status: 'failed', failureClass: 'environment', attempts: 1, reward: null, reason: expect.stringMatching(/cannot start: (ErrImagePull|ImagePullBackOff)/) });
    await kube.close();

    const stuck = await setup(exampleTemplate(), { pendingTimeoutSeconds: 1 }, { maxRunningPods: 0 });
    const [pending] = await runRollouts(batch({ batchId: 'k-pending', maxAttempts: 2 }), { gateway, harness: stuck, verifier });
    expect(pending).toMatchObject({ status: 'failed', failureClass: 'infrastructure', attempts: 2, reason: expect.stringContaining('did not start within 1 s (Unschedulable') });
  });

  it('retries an evicted pod as a new attempt, and rides out an API server that fails a request', async () => {
    const launches = path.join(dir, 'evict-launches.log');
    const harness = await setup(template('evict', path.join(fixtures, 'counting.mjs'), `          env:\n            - { name: LAUNCH_LOG, value: ${JSON.stringify(launches)} }\n            - { name: LAUNCH_DELAY_MS, value: "1500" }\n`));
    kube.failNextRequests(1, 503, { method: 'POST', pathIncludes: '/jobs' });
    const running = runRollouts(batch({ batchId: 'k-evict' }), { gateway, harness, verifier });
    const core = kube.kubeConfig().makeApiClient(CoreV1Api);
    let pod: string | undefined;
    // Evicted mid-run: once the harness has started working (its line written: the file exists from the open, before the write).
    await waitFor(() => existsSync(launches) && readFileSync(launches, 'utf8').includes('k-evict.t.0 1\n'));
    await waitFor(async () => {
      const pods = await core.listNamespacedPod({ namespace: 'default', labelSelector: `job-name=${jobNameFor('k-evict.t.0', 1)}` });
      pod = pods.items.find((p) => p.status?.phase === 'Running')?.metadata?.name;
      return pod !== undefined;
    });
    kube.evictPod('default', pod as string);
    const [outcome] = await running;
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1, attempts: 2 });
    expect(readFileSync(launches, 'utf8').trim().split('\n')).toEqual(['k-evict.t.0 1', 'k-evict.t.0 2']);
    const retried = (await t.store.listEvents('k-evict.t.0')).find((e) => e.type === 'custom' && e.payload.name === 'attempt_failed');
    expect(retried?.payload.data).toMatchObject({ attempt: 1, failureClass: 'infrastructure', reason: expect.stringContaining('Evicted') });
    expect(kube.jobsCreated()).toBe(2);
  });

  it('follows the Job a dead runner left behind instead of launching another, and deletes Jobs on cancel', async () => {
    const harness = await setup(exampleTemplate());
    // What a runner that died leaves: a running rollout and its attempt's Job in the cluster.
    const issued = await gateway.createRollout({ id: 'k-orphan.t.0', taskId: 't', mode: 'train', policyVersion: 'policy-v1', metadata: {} });
    await gateway.setStatus(issued.rollout.id, { status: 'running', reason: 'harness started (attempt 1)' });
    const settings = kubernetesHarnessSchema.parse({ template: exampleTemplate(), image: IMAGE });
    const job = renderJob(readFileSync(settings.template, 'utf8'), settings, {
      rolloutId: issued.rollout.id,
      attempt: 1,
      taskId: 't',
      env: { OPENAI_BASE_URL: issued.baseUrl, OPENAI_API_KEY: issued.key, REIN_TASK: JSON.stringify({ id: 't', question: '6*7' }) },
    });
    await kube.kubeConfig().makeApiClient(BatchV1Api).createNamespacedJob({ namespace: 'default', body: job });
    const [resumed] = await runRollouts(batch({ batchId: 'k-orphan' }), { gateway, harness, verifier });
    expect(resumed).toMatchObject({ status: 'succeeded', reward: 1, attempts: 1 });
    expect(kube.jobsCreated()).toBe(1);
    await kube.close();

    const hang = await setup(inline('hang-cancel', 'setInterval(() => {}, 1000);'));
    const controller = new AbortController();
    const cancelled = runRollouts(batch({ batchId: 'k-cancel', samplesPerTask: 3 }), { gateway, harness: hang, verifier, signal: controller.signal });
    await waitFor(() => kube.runningPods() === 3);
    controller.abort();
    expect((await cancelled).map((o) => o.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    await waitFor(() => kube.runningPods() === 0);
    const left = await kube.kubeConfig().makeApiClient(BatchV1Api).listNamespacedJob({ namespace: 'default' });
    expect(left.items).toEqual([]);
  });

  it('leaves the Job running when its worker hands the rollouts back, and the next runner follows it to the end', async () => {
    const launches = path.join(dir, 'handback-launches.log');
    const harness = await setup(template('handback', path.join(fixtures, 'counting.mjs'), `          env:\n            - { name: LAUNCH_LOG, value: ${JSON.stringify(launches)} }\n            - { name: LAUNCH_DELAY_MS, value: "2000" }\n`));
    const shutdown = new AbortController();
    const first = runRollouts(batch({ batchId: 'k-handback' }), { gateway, harness, verifier, signal: shutdown.signal, cancelIsFinal: () => false });
    await waitFor(() => existsSync(launches) && readFileSync(launches, 'utf8').includes('k-handback.t.0 1\n'));
    shutdown.abort();
    await expect(first).rejects.toBeInstanceOf(RolloutsHandedBack);
    const jobs = await kube.kubeConfig().makeApiClient(BatchV1Api).listNamespacedJob({ namespace: 'default' });
    expect(jobs.items.map((j) => j.metadata?.name)).toEqual([jobNameFor('k-handback.t.0', 1)]);

    const [outcome] = await runRollouts(batch({ batchId: 'k-handback' }), { gateway, harness, verifier });
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1, attempts: 1 });
    expect(readFileSync(launches, 'utf8')).toBe('k-handback.t.0 1\n');
    expect(kube.jobsCreated()).toBe(1);
  });

  it('runs from the config file: template and kubeconfig paths relative to it, the template part of the harness version', async () => {
    kube = await startKubeStandIn({ images: [IMAGE] });
    const configDir = mkdtempSync(path.join(dir, 'config-'));
    writeFileSync(path.join(configDir, 'kubeconfig.yaml'), kube.kubeConfig().exportConfig());
    writeFileSync(path.join(configDir, 'job.yaml'), readFileSync(exampleTemplate(), 'utf8'));
    writeFileSync(
      path.join(configDir, 'rein.yaml'),
      `harness:\n  version: "1.0"\n  kubernetes:\n    template: job.yaml\n    image: ${IMAGE}\n    kubeconfig: kubeconfig.yaml\n    timeoutSeconds: 30\n`,
    );
    const { config } = loadConfig({ file: path.join(configDir, 'rein.yaml'), env: {} });
    const settings = config.harness as NonNullable<typeof config.harness>;
    const harness = harnessExecutor(settings);
    executors.push(harness);
    const [outcome] = await runRollouts(batch({ batchId: 'k-config', harnessVersion: harnessVersion(settings) }), { gateway, harness, verifier });
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1 });
    expect((await t.store.getRollout('k-config.t.0'))?.metadata.harnessVersion).toBe(harnessVersion(settings));
    const before = harnessVersion(settings);
    writeFileSync(path.join(configDir, 'job.yaml'), readFileSync(path.join(configDir, 'job.yaml'), 'utf8').replace('terminationGracePeriodSeconds: 1', 'terminationGracePeriodSeconds: 2'));
    expect(harnessVersion(settings)).not.toBe(before);
  });

  it('refuses an invalid template or credentials the API server rejects before launching anything', async () => {
    const broken = await setup(template('broken', 'x.mjs', '      restartPolicy: Always\n'));
    await expect(runRollouts(batch({ batchId: 'k-invalid' }), { gateway, harness: broken, verifier })).rejects.toThrow(/restartPolicy Always; remove it/);
    await kube.close();
    kube = await startKubeStandIn({ images: [IMAGE] });
    const config = kube.kubeConfig();
    const wrongToken = kubernetesExecutor(kubernetesHarnessSchema.parse({ template: exampleTemplate(), image: IMAGE }), { kubeConfig: withToken(config, 'wrong') });
    executors.push(wrongToken);
    const attempt = runRollouts(batch({ batchId: 'k-denied' }), { gateway, harness: wrongToken, verifier });
    await expect(attempt).rejects.toThrow(RolloutSetupError);
    await expect(attempt).rejects.toThrow(/refused to list Jobs in namespace default \(401\)/);
    expect(kube.jobsCreated()).toBe(0);
    expect(await t.store.getRollout('k-invalid.t.0')).toBeUndefined();
  });
});

function withToken(config: ReturnType<KubeStandIn['kubeConfig']>, token: string) {
  const copy = new (Object.getPrototypeOf(config).constructor)();
  copy.loadFromOptions({ clusters: config.clusters, contexts: config.contexts, currentContext: config.currentContext, users: config.users.map((u) => ({ ...u, token })) });
  return copy;
}

async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
