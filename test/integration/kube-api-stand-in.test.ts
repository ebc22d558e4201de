import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ApiException, BatchV1Api, CoreV1Api, KubeConfig, makeInformer, Watch, type V1Job, type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeStandIn, type KubeStandIn } from '../helpers/kube-api-stand-in.js';

const NS = 'default';
const IMAGE = 'rein/harness:1';

/** A Job whose single container runs `node -e script`. */
function nodeJob(name: string, script: string, options: {
  env?: Record<string, string>; backoffLimit?: number; image?: string; labels?: Record<string, string>;
  grace?: number; activeDeadlineSeconds?: number; ttlSecondsAfterFinished?: number;
} = {}): V1Job {
  return {
    metadata: { name, labels: options.labels },
    spec: {
      backoffLimit: options.backoffLimit ?? 0,
      activeDeadlineSeconds: options.activeDeadlineSeconds,
      ttlSecondsAfterFinished: options.ttlSecondsAfterFinished,
      template: {
        metadata: { labels: { app: 'rein-test', ...options.labels } },
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: options.grace,
          containers: [{
            name: 'harness', image: options.image ?? IMAGE, command: ['node', '-e', script],
            env: Object.entries(options.env ?? {}).map(([envName, value]) => ({ name: envName, value })),
          }],
        },
      },
    },
  };
}

/** Writes its pid to $PID_FILE, ignores SIGTERM and never exits on its own. */
const HANG = `require('fs').writeFileSync(process.env.PID_FILE, String(process.pid)); process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);`;

/** Polls for a state; the deadline is only for a hang (starting a process can take seconds on a loaded machine). */
async function waitFor<T>(probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The HTTP code and parsed Status of a failed call. */
async function failure(call: Promise<unknown>): Promise<{ code: number; status: Record<string, unknown> | undefined }> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof ApiException)) throw error;
    // client-node puts the raw response text in `body` (undefined for a 401).
    const body = error.body as string | undefined;
    return { code: error.code, status: body ? JSON.parse(body) as Record<string, unknown> : undefined };
  }
  throw new Error('expected the call to fail');
}

async function isNotFound(call: Promise<unknown>): Promise<boolean> {
  try {
    await call;
    return false;
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return true;
    throw error;
  }
}

/** The pid a HANG container wrote, once it has. */
const pidIn = (file: string): Promise<number> => waitFor(() => {
  try {
    return Number(readFileSync(file, 'utf8')) || undefined;
  } catch {
    return undefined;
  }
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const condition = (job: V1Job | undefined, type: string) => job?.status?.conditions?.find((c) => c.type === type && c.status === 'True');

describe('the Kubernetes API stand-in, through @kubernetes/client-node', () => {
  let kube: KubeStandIn;
  let batch: BatchV1Api;
  let core: CoreV1Api;
  let kubeConfig: KubeConfig;
  let workDir: string;

  beforeAll(async () => {
    kube = await startKubeStandIn({ images: [IMAGE] });
    kubeConfig = kube.kubeConfig();
    batch = kubeConfig.makeApiClient(BatchV1Api);
    core = kubeConfig.makeApiClient(CoreV1Api);
    workDir = mkdtempSync(path.join(os.tmpdir(), 'kube-stand-in-test-'));
  });
  afterAll(async () => {
    await kube.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  const podsOf = async (job: string): Promise<V1Pod[]> =>
    (await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${job}` })).items;
  const onlyPod = async (job: string): Promise<V1Pod | undefined> => (await podsOf(job))[0];

  it('runs a job to completion: informer, pod log, termination message', async () => {
    const informer = makeInformer<V1Job>(kubeConfig, `/apis/batch/v1/namespaces/${NS}/jobs`,
      () => batch.listNamespacedJob({ namespace: NS, labelSelector: 'case=complete' }), 'case=complete');
    const complete = new Promise<V1Job>((resolve) => informer.on('update', (job) => condition(job, 'Complete') && resolve(job)));
    await informer.start();
    const script = `console.log('line 1'); console.error('line 2'); require('fs').writeFileSync(process.env.RESULT_FILE, '{"reward":1}');`;
    const created = await batch.createNamespacedJob({
      namespace: NS, body: nodeJob('complete', script, { labels: { case: 'complete' }, env: { RESULT_FILE: '/dev/termination-log' } }),
    });
    expect(created.spec).toMatchObject({ backoffLimit: 0, completions: 1, parallelism: 1 });
    expect(created.spec?.template.spec?.containers[0]).toMatchObject({ terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File' });
    expect(created.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);

    const job = await complete;
    await informer.stop();
    expect(job.status).toMatchObject({ succeeded: 1 });
    expect(job.status?.active ?? 0).toBe(0);
    expect(job.status?.completionTime).toBeTruthy();
    expect(job.status?.conditions?.map((c) => c.type)).toEqual(['SuccessCriteriaMet', 'Complete']);
    expect(Number(job.metadata?.resourceVersion)).toBeGreaterThan(Number(created.metadata?.resourceVersion));

    const pod = (await onlyPod('complete'))!;
    expect(pod.metadata?.name).toMatch(/^complete-[a-z0-9]{5}$/);
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Job', name: 'complete', uid: created.metadata?.uid, controller: true });
    expect(pod.metadata?.labels).toMatchObject({
      app: 'rein-test', 'job-name': 'complete', 'batch.kubernetes.io/job-name': 'complete', 'controller-uid': created.metadata?.uid,
    });
    expect(pod.status?.phase).toBe('Succeeded');
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed', message: '{"reward":1}' });
    const log = await core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: NS, container: 'harness' });
    expect(log).toBe('line 1\nline 2\n');
    expect(await core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: NS, tailLines: 1 })).toBe('line 2\n');
  });

  it('retries a failing container up to backoffLimit, then fails the job with BackoffLimitExceeded', async () => {
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('fails', `console.error('boom'); process.exit(3)`, { backoffLimit: 1 }) });
    const job = await waitFor(async () => {
      const current = await batch.readNamespacedJob({ name: 'fails', namespace: NS });
      return condition(current, 'Failed') && current;
    });
    expect(condition(job, 'Failed')).toMatchObject({ reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' });
    expect(condition(job, 'FailureTarget')).toBeTruthy();
    expect(job.status?.failed).toBe(2);
    const pods = await podsOf('fails');
    expect(pods).toHaveLength(2);
    for (const pod of pods) {
      expect(pod.status?.phase).toBe('Failed');
      expect(pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 3, reason: 'Error' });
    }
  });

  it('deletes a hanging job with its pod (Background): SIGTERM, SIGKILL after the grace period, DELETED', async () => {
    const pidFile = path.join(workDir, 'hang.pid');
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('hang', HANG, { env: { PID_FILE: pidFile }, grace: 1 }) });
    const events: Array<{ type: string; pod: V1Pod }> = [];
    const watch = await new Watch(kubeConfig).watch(`/api/v1/namespaces/${NS}/pods`, { labelSelector: 'job-name=hang' },
      (type, pod: V1Pod) => events.push({ type, pod }), () => undefined);
    const pid = await pidIn(pidFile);
    await waitFor(async () => (await onlyPod('hang'))?.status?.phase === 'Running');
    expect(isRunning(pid)).toBe(true);
    expect(kube.runningPods()).toBe(1);

    const deletedAt = Date.now();
    await batch.deleteNamespacedJob({ name: 'hang', namespace: NS, propagationPolicy: 'Background' });
    expect((await failure(batch.readNamespacedJob({ name: 'hang', namespace: NS }))).code).toBe(404);
    await waitFor(() => events.some((e) => e.type === 'DELETED'));
    watch.abort();
    expect(Date.now() - deletedAt).toBeGreaterThanOrEqual(900); // SIGTERM was ignored: SIGKILL after 1 s
    expect(isRunning(pid)).toBe(false);
    const [added, ...rest] = events.map((e) => e.type);
    expect(added).toBe('ADDED'); // the pod as it was when the watch started
    expect(rest.at(-1)).toBe('DELETED');
    expect(events.find((e) => e.pod.metadata?.deletionTimestamp)).toBeTruthy();
    expect(events.at(-1)?.pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 137, signal: 9 });
  });

  it('leaves pods running when a job is deleted without a propagation policy (Orphan, as for batch/v1)', async () => {
    const pidFile = path.join(workDir, 'orphan.pid');
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('orphan', HANG, { env: { PID_FILE: pidFile }, grace: 0 }) });
    await waitFor(async () => (await onlyPod('orphan'))?.status?.phase === 'Running');
    await batch.deleteNamespacedJob({ name: 'orphan', namespace: NS });
    await waitFor(() => isNotFound(batch.readNamespacedJob({ name: 'orphan', namespace: NS })));
    const pod = (await onlyPod('orphan'))!;
    expect(pod.status?.phase).toBe('Running');
    expect(pod.metadata?.ownerReferences).toBeUndefined();
    const pid = await pidIn(pidFile);
    expect(isRunning(pid)).toBe(true);
    await core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: NS });
    await waitFor(async () => (await podsOf('orphan')).length === 0);
    expect(isRunning(pid)).toBe(false);
  });

  it('keeps a pod with an image that does not pull in ImagePullBackOff, and its log waiting to start', async () => {
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('no-image', 'console.log(1)', { image: 'registry.invalid/nope:1' }) });
    const pod = await waitFor(async () => {
      const current = await onlyPod('no-image');
      return current?.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ImagePullBackOff' ? current : undefined;
    });
    expect(pod.status?.phase).toBe('Pending');
    const { code, status } = await failure(core.readNamespacedPodLog({ name: pod.metadata!.name!, namespace: NS }));
    expect(code).toBe(400);
    expect(status).toMatchObject({ kind: 'Status', reason: 'BadRequest', message: expect.stringContaining('is waiting to start') });
  });

  it('answers errors with Status objects: 409, 422, 401, 404', async () => {
    const body = nodeJob('dup', 'process.exit(0)');
    await batch.createNamespacedJob({ namespace: NS, body });
    const duplicate = await failure(batch.createNamespacedJob({ namespace: NS, body }));
    expect(duplicate).toMatchObject({ code: 409, status: { kind: 'Status', status: 'Failure', reason: 'AlreadyExists', code: 409 } });

    const always = nodeJob('always', 'process.exit(0)');
    always.spec!.template.spec!.restartPolicy = 'Always';
    const invalid = await failure(batch.createNamespacedJob({ namespace: NS, body: always }));
    expect(invalid).toMatchObject({ code: 422, status: { reason: 'Invalid', message: expect.stringContaining('spec.template.spec.restartPolicy') } });
    const badName = await failure(batch.createNamespacedJob({ namespace: NS, body: nodeJob('Not_A_Label', 'process.exit(0)') }));
    expect(badName.code).toBe(422);

    const stranger = new KubeConfig();
    stranger.loadFromOptions({
      clusters: [{ name: 'c', server: kube.url, skipTLSVerify: true }], users: [{ name: 'u', token: 'wrong' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x',
    });
    expect((await failure(stranger.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: NS }))).code).toBe(401);
    expect((await failure(batch.readNamespacedJob({ name: 'missing', namespace: NS }))).status).toMatchObject({ reason: 'NotFound', code: 404 });
  });

  it('fails the next matching request once when told to', async () => {
    const before = kube.jobsCreated();
    kube.failNextRequests(1, 503, { method: 'POST', pathIncludes: '/jobs' });
    const injected = await failure(batch.createNamespacedJob({ namespace: NS, body: nodeJob('flaky', 'process.exit(0)') }));
    expect(injected).toMatchObject({ code: 503, status: { reason: 'ServiceUnavailable' } });
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('flaky', 'process.exit(0)') });
    expect(kube.jobsCreated()).toBe(before + 1);
  });

  it('fails a job that outlives activeDeadlineSeconds with DeadlineExceeded and kills its pod', async () => {
    const pidFile = path.join(workDir, 'deadline.pid');
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('deadline', HANG, { env: { PID_FILE: pidFile }, grace: 0, activeDeadlineSeconds: 1 }) });
    const job = await waitFor(async () => {
      const current = await batch.readNamespacedJob({ name: 'deadline', namespace: NS });
      return condition(current, 'Failed') && current;
    });
    expect(condition(job, 'Failed')).toMatchObject({ reason: 'DeadlineExceeded', message: 'Job was active longer than specified deadline' });
    await waitFor(async () => (await podsOf('deadline')).length === 0);
    expect(isRunning(await pidIn(pidFile))).toBe(false);
    expect((await batch.readNamespacedJob({ name: 'deadline', namespace: NS })).status?.failed).toBe(1);
  });

  it('evicts a pod: Failed with reason Evicted, and the job counts the failure', async () => {
    const pidFile = path.join(workDir, 'evict.pid');
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('evict', HANG, { env: { PID_FILE: pidFile } }) });
    const running = await waitFor(async () => {
      const pod = await onlyPod('evict');
      return pod?.status?.phase === 'Running' ? pod : undefined;
    });
    const pid = await pidIn(pidFile);
    kube.evictPod(NS, running.metadata!.name!);
    const pod = await waitFor(async () => {
      const current = await core.readNamespacedPod({ name: running.metadata!.name!, namespace: NS });
      return current.status?.phase === 'Failed' ? current : undefined;
    });
    expect(pod.status).toMatchObject({ reason: 'Evicted', message: 'The node was low on resource: memory.' });
    expect(isRunning(pid)).toBe(false);
    const job = await waitFor(async () => {
      const current = await batch.readNamespacedJob({ name: 'evict', namespace: NS });
      return condition(current, 'Failed') && current;
    });
    expect(condition(job, 'Failed')?.reason).toBe('BackoffLimitExceeded');
  });

  it('deletes a finished job after ttlSecondsAfterFinished', async () => {
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('ttl', 'process.exit(0)', { ttlSecondsAfterFinished: 0 }) });
    await waitFor(() => isNotFound(batch.readNamespacedJob({ name: 'ttl', namespace: NS })));
    await waitFor(async () => (await podsOf('ttl')).length === 0);
  });

  it('filters lists by label selector', async () => {
    const ns = 'selectors';
    for (const [name, tier] of [['sel-a', 'x'], ['sel-b', 'y'], ['sel-c', undefined]] as const) {
      const body = nodeJob(name, 'process.exit(0)', { image: 'unpulled:1', labels: { group: 'sel', ...(tier && { tier }) } });
      await batch.createNamespacedJob({ namespace: ns, body });
    }
    const names = async (labelSelector: string) =>
      (await batch.listNamespacedJob({ namespace: ns, labelSelector })).items.map((j) => j.metadata?.name);
    expect(await names('group=sel')).toEqual(['sel-a', 'sel-b', 'sel-c']);
    expect(await names('group==sel,tier in (x, y)')).toEqual(['sel-a', 'sel-b']);
    expect(await names('group=sel,tier notin (x)')).toEqual(['sel-b', 'sel-c']);
    expect(await names('group=sel,tier!=x')).toEqual(['sel-b', 'sel-c']);
    expect(await names('group,!tier')).toEqual(['sel-c']);
    expect(await names('tier')).toEqual(['sel-a', 'sel-b']);
    expect((await failure(batch.listNamespacedJob({ namespace: ns, labelSelector: 'a b c' }))).code).toBe(400);
    expect(await names('group=other')).toEqual([]);
  });
});

describe('the stand-in with one pod of capacity and a short event history', () => {
  let kube: KubeStandIn;
  let batch: BatchV1Api;
  let core: CoreV1Api;
  beforeAll(async () => {
    kube = await startKubeStandIn({ maxRunningPods: 1, eventHistory: 5, startDelayMs: 20 });
    batch = kube.kubeConfig().makeApiClient(BatchV1Api);
    core = kube.kubeConfig().makeApiClient(CoreV1Api);
  });
  afterAll(() => kube.close());

  it('keeps a pod Pending/Unschedulable until another one finishes', async () => {
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('first', 'setTimeout(() => {}, 800)') });
    await waitFor(async () => (await core.listNamespacedPod({ namespace: NS, labelSelector: 'job-name=first' })).items[0]?.status?.phase === 'Running');
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob('second', 'process.exit(0)') });
    const waiting = await waitFor(async () => {
      const pod = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'job-name=second' })).items[0];
      return pod?.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False') ? pod : undefined;
    });
    expect(waiting.status?.phase).toBe('Pending');
    expect(waiting.status?.conditions?.find((c) => c.type === 'PodScheduled')?.reason).toBe('Unschedulable');
    expect(kube.runningPods()).toBe(1);
    const second = await waitFor(async () => {
      const job = await batch.readNamespacedJob({ name: 'second', namespace: NS });
      return condition(job, 'Complete') && job;
    });
    const first = await batch.readNamespacedJob({ name: 'first', namespace: NS });
    expect(condition(first, 'Complete')).toBeTruthy();
    expect(second.status?.startTime!.getTime()).toBeLessThanOrEqual(first.status!.completionTime!.getTime());
  });

  it('answers a watch from a compacted resourceVersion with a 410 Expired event, and an informer relists', async () => {
    const events: Array<{ type: string; code?: number }> = [];
    const ended = new Promise<void>((resolve) => {
      void new Watch(kube.kubeConfig()).watch(`/apis/batch/v1/namespaces/${NS}/jobs`, { resourceVersion: '1' },
        (type, object: { code?: number }) => events.push({ type, code: object.code }), () => resolve());
    });
    await ended;
    expect(events).toEqual([{ type: 'ERROR', code: 410 }]);

    // An informer restarted after its watch broke resumes from its last resourceVersion; when
    // that was compacted meanwhile it gets the 410 event and lists again.
    let lists = 0;
    const informer = makeInformer<V1Job>(kube.kubeConfig(), `/apis/batch/v1/namespaces/${NS}/jobs`, () => {
      lists += 1;
      return batch.listNamespacedJob({ namespace: NS });
    });
    const errors: unknown[] = [];
    informer.on('error', (error) => errors.push(error));
    const names = () => informer.list(NS).map((j) => j.metadata?.name).sort();
    await informer.start();
    expect(names()).toEqual(['first', 'second']);
    await informer.stop();
    // stop() aborts the watch and reports that as an error; restarting before it arrives would
    // let the old watch's handler abort the new one.
    await waitFor(() => errors.length > 0);
    for (const name of ['third', 'fourth']) await batch.createNamespacedJob({ namespace: NS, body: nodeJob(name, 'process.exit(0)') });
    await waitFor(async () => condition(await batch.readNamespacedJob({ name: 'fourth', namespace: NS }), 'Complete'));
    await informer.start();
    await waitFor(() => names().length === 4);
    expect(names()).toEqual(['first', 'fourth', 'second', 'third']);
    expect(lists).toBe(2);
    await informer.stop();
  });
});
