import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { BatchV1Api, CoreV1Api, Watch, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeControlPlane, type KubeControlPlane } from '../helpers/kube-control-plane.js';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent/node-agent.js';
import { isRunning } from '../helpers/processes.js';

/**
 * The real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager built by
 * scripts/build-kube.sh) with the node agent as its one node: Jobs run through the real Job
 * controller, pods through the agent, logs through the apiserver's pods/log proxy, and the
 * example's RBAC Role through the real authorizer.
 */
const NODE_IMAGE = 'rein-test/node:1';
const rbacYaml = readFileSync(
  path.resolve(import.meta.dirname, '../../examples/calculator-agent/kubernetes/rbac.yaml'),
  'utf8',
);

let plane: KubeControlPlane;
let agent: NodeAgent;
let batch: BatchV1Api;
let core: CoreV1Api;

beforeAll(async () => {
  plane = await startKubeControlPlane();
  agent = await startNodeAgent(plane, { images: { [NODE_IMAGE]: { entrypoint: [process.execPath] } } });
  batch = plane.kubeConfig().makeApiClient(BatchV1Api);
  core = plane.kubeConfig().makeApiClient(CoreV1Api);
});
afterAll(async () => {
  await agent?.close();
  await plane?.close();
});

/** A Job whose one container runs `node -e <code>` on the node agent. */
function nodeJob(
  name: string,
  code: string,
  container: Record<string, unknown> = {},
  podSpec: Record<string, unknown> = {},
): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 2,
          containers: [{ name: 'main', image: NODE_IMAGE, args: ['-e', code], ...container }],
          ...podSpec,
        },
      },
    },
  };
}

/** The first value `read` gives that is not undefined, read again until it is (the test's timeout bounds it). */
async function eventually<T>(read: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const condition = (job: V1Job, type: string) =>
  job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
const jobCondition = (name: string, type: string, namespace = 'default') =>
  eventually(async () => condition(await batch.readNamespacedJob({ name, namespace }), type));
async function jobPod(jobName: string, namespace = 'default', api = core): Promise<V1Pod> {
  return eventually(
    async () =>
      (await api.listNamespacedPod({ namespace, labelSelector: `batch.kubernetes.io/job-name=${jobName}` })).items[0],
  );
}
const errorCode = (err: unknown) => (err as { code?: number }).code;

describe('Jobs on the real control plane with the node agent', () => {
  it('runs a Job to Complete, its pod logs readable with readNamespacedPodLog', async () => {
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob('hello', "console.log('hello'); console.error('from stderr'); console.log('world')"),
    });
    const complete = await jobCondition('hello', 'Complete');
    expect(complete.status).toBe('True');
    const pod = await jobPod('hello');
    expect(pod.status?.phase).toBe('Succeeded');
    expect(pod.spec?.nodeName).toBe(agent.nodeName);
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
    const name = pod.metadata?.name as string;
    const log = await core.readNamespacedPodLog({ name, namespace: 'default' });
    expect(log.split('\n').sort()).toEqual(['', 'from stderr', 'hello', 'world']);
    expect(await core.readNamespacedPodLog({ name, namespace: 'default', container: 'main', tailLines: 1 })).toMatch(
      /^(world|from stderr)\n$/,
    );
  });

  it("gives a failing container's Job a Failed condition, with the exit code and the termination message", async () => {
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob(
        'fails',
        "require('fs').writeFileSync('/dev/termination-log', 'the answer was wrong'); console.log('trying'); process.exit(3)",
      ),
    });
    expect(await jobCondition('fails', 'Failed')).toMatchObject({ reason: 'BackoffLimitExceeded' });
    const pod = await jobPod('fails');
    expect(pod.status?.phase).toBe('Failed');
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 3,
      reason: 'Error',
      message: 'the answer was wrong',
    });
  });

  it('takes the termination message from the log with FallbackToLogsOnError, at its terminationMessagePath', async () => {
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob('fallback', "console.log('line one'); console.error('it broke'); process.exit(1)", {
        terminationMessagePolicy: 'FallbackToLogsOnError',
      }),
    });
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob('custom-path', "require('fs').writeFileSync(process.env.OUT, 'written to the custom path')", {
        terminationMessagePath: '/tmp/result',
        env: [{ name: 'OUT', value: '/tmp/result' }],
      }),
    });
    await jobCondition('fallback', 'Failed');
    expect(
      (await jobPod('fallback')).status?.containerStatuses?.[0]?.state?.terminated?.message?.split('\n').sort(),
    ).toEqual(['', 'it broke', 'line one']);
    await jobCondition('custom-path', 'Complete');
    expect((await jobPod('custom-path')).status?.containerStatuses?.[0]?.state?.terminated?.message).toBe(
      'written to the custom path',
    );
  });

  it('runs init containers in order before the main container, sharing an emptyDir; a failing one fails the pod and the main container never runs', async () => {
    const scratch = { volumeMounts: [{ name: 'scratch', mountPath: '/scratch' }] };
    const append = (line: string) => ({
      name: `init-${line}`,
      image: NODE_IMAGE,
      args: ['-e', `require('fs').appendFileSync(process.argv[1], '${line}\\n')`, '/scratch/order'],
      ...scratch,
    });
    const podSpec = { initContainers: [append('one'), append('two')], volumes: [{ name: 'scratch', emptyDir: {} }] };
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob(
        'inits',
        "process.stdout.write(require('fs').readFileSync(process.argv[1], 'utf8'))",
        {
          ...scratch,
          args: ['-e', "process.stdout.write(require('fs').readFileSync(process.argv[1], 'utf8'))", '/scratch/order'],
        },
        podSpec,
      ),
    });
    await jobCondition('inits', 'Complete');
    const pod = await jobPod('inits');
    expect(pod.status?.initContainerStatuses?.map((s) => [s.name, s.state?.terminated?.exitCode])).toEqual([
      ['init-one', 0],
      ['init-two', 0],
    ]);
    expect(pod.status?.conditions?.find((c) => c.type === 'Initialized')?.status).toBe('True');
    expect(
      await core.readNamespacedPodLog({ name: pod.metadata?.name as string, namespace: 'default', container: 'main' }),
    ).toBe('one\ntwo\n');
    expect(
      await core.readNamespacedPodLog({
        name: pod.metadata?.name as string,
        namespace: 'default',
        container: 'init-one',
      }),
    ).toBe('');

    const failing = {
      ...podSpec,
      initContainers: [
        {
          name: 'init-fails',
          image: NODE_IMAGE,
          args: ['-e', "require('fs').writeFileSync('/dev/termination-log', 'no credentials'); process.exit(2)"],
        },
        append('never'),
      ],
    };
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob('init-fails', "console.log('main ran')", {}, failing),
    });
    await jobCondition('init-fails', 'Failed');
    const failed = await eventually(async () =>
      (await jobPod('init-fails')).status?.phase === 'Failed' ? jobPod('init-fails') : undefined,
    );
    expect(failed.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 2,
      message: 'no credentials',
    });
    expect(failed.status?.initContainerStatuses?.[1]?.state?.waiting?.reason).toBe('PodInitializing');
    expect(failed.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('PodInitializing');
    expect(failed.status?.conditions?.find((c) => c.type === 'Initialized')).toMatchObject({
      status: 'False',
      reason: 'ContainersNotInitialized',
    });
  });

  it('reports an image not in the image map as ErrImagePull, with no log to read', async () => {
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob('no-image', '', { image: 'registry.example/missing:1' }),
    });
    const waiting = await eventually(
      async () => (await jobPod('no-image')).status?.containerStatuses?.[0]?.state?.waiting,
    );
    expect(waiting.reason).toBe('ErrImagePull');
    expect(waiting.message).toContain('registry.example/missing:1');
    const pod = await jobPod('no-image');
    expect(pod.status?.phase).toBe('Pending');
    const err = await core
      .readNamespacedPodLog({ name: pod.metadata?.name as string, namespace: 'default' })
      .catch((e: unknown) => e);
    expect(errorCode(err)).toBe(400);
    expect(String((err as { body?: unknown }).body)).toContain('is waiting to start');
    await batch.deleteNamespacedJob({ name: 'no-image', namespace: 'default', propagationPolicy: 'Background' });
  });

  it('evicts a pod as the kubelet does under node pressure: the Job fails', async () => {
    await batch.createNamespacedJob({ namespace: 'default', body: nodeJob('evicted', 'setInterval(() => {}, 1000)') });
    const pod = await jobPod('evicted');
    await eventually(async () =>
      (await core.readNamespacedPod({ name: pod.metadata?.name as string, namespace: 'default' })).status?.phase ===
      'Running'
        ? true
        : undefined,
    );
    await agent.evictPod('default', pod.metadata?.name as string);
    const evicted = await core.readNamespacedPod({ name: pod.metadata?.name as string, namespace: 'default' });
    expect(evicted.status).toMatchObject({ phase: 'Failed', reason: 'Evicted' });
    expect(evicted.status?.conditions?.find((c) => c.type === 'DisruptionTarget')).toMatchObject({
      status: 'True',
      reason: 'TerminationByKubelet',
    });
    await jobCondition('evicted', 'Failed');
  });

  it('kills a running pod deleted with its Job (Background propagation): the garbage collector deletes the pod, the agent stops it and it goes', async () => {
    await batch.createNamespacedJob({
      namespace: 'default',
      body: nodeJob(
        'deleted',
        "process.on('SIGTERM', () => {}); console.log('ignoring SIGTERM'); setInterval(() => {}, 1000)",
      ),
    });
    const pod = await jobPod('deleted');
    const name = pod.metadata?.name as string;
    await eventually(async () =>
      (await core.readNamespacedPodLog({ name, namespace: 'default' }).catch(() => '')).includes('ignoring SIGTERM')
        ? true
        : undefined,
    );
    expect(agent.runningPods()).toBeGreaterThan(0);
    await batch.deleteNamespacedJob({ name: 'deleted', namespace: 'default', propagationPolicy: 'Background' });
    // SIGTERM is ignored: SIGKILL after terminationGracePeriodSeconds (2), then the pod is gone from the API.
    const gone = await eventually(() =>
      core.readNamespacedPod({ name, namespace: 'default' }).then(
        () => undefined,
        (err: unknown) => errorCode(err),
      ),
    );
    expect(gone).toBe(404);
    expect(agent.runningPods()).toBe(0);
  });

  it('keeps pods Pending and Unschedulable while the node takes no pods, then runs them', async () => {
    agent.setMaxPods(0);
    try {
      await batch.createNamespacedJob({ namespace: 'default', body: nodeJob('waits', "console.log('ran')") });
      const scheduled = await eventually(async () =>
        (await jobPod('waits')).status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False'),
      );
      expect(scheduled.reason).toBe('Unschedulable');
      expect((await jobPod('waits')).spec?.nodeName).toBeUndefined();
    } finally {
      agent.setMaxPods(110);
    }
    await jobCondition('waits', 'Complete');
  });

  it('runs more pods than the node takes at once as earlier ones end, all of them', async () => {
    agent.setMaxPods(2);
    try {
      const names = Array.from({ length: 6 }, (_, i) => `batched-${i}`);
      await Promise.all(
        names.map((name) =>
          batch.createNamespacedJob({ namespace: 'default', body: nodeJob(name, 'setTimeout(() => {}, 300)') }),
        ),
      );
      for (const name of names) await jobCondition(name, 'Complete');
    } finally {
      agent.setMaxPods(110);
    }
  });
});

describe("the example's RBAC Role (examples/calculator-agent/kubernetes/rbac.yaml) on the real apiserver", () => {
  let worker: KubeConfig;
  beforeAll(async () => {
    await plane.createFromYaml(rbacYaml);
    worker = await plane.kubeConfigForServiceAccount('rein-rollouts', 'rein-worker');
  });

  it("lets the worker's ServiceAccount do what Rein's worker does with rollout Jobs", async () => {
    const namespace = 'rein-rollouts';
    const workerBatch = worker.makeApiClient(BatchV1Api);
    const workerCore = worker.makeApiClient(CoreV1Api);
    // Watching Jobs and pods, as the executor's informers do.
    const seen: string[] = [];
    const watches = await Promise.all(
      [`/apis/batch/v1/namespaces/${namespace}/jobs`, `/api/v1/namespaces/${namespace}/pods`].map((p) =>
        new Watch(worker).watch(
          p,
          { labelSelector: 'app=rbac-check' },
          (type, obj: { kind?: string }) => seen.push(`${type} ${obj.kind}`),
          () => {},
        ),
      ),
    );
    try {
      const job = nodeJob(
        'rbac-check',
        "console.log('as the worker')",
        {},
        { serviceAccountName: 'rein-harness', automountServiceAccountToken: false },
      );
      job.metadata = { name: 'rbac-check', labels: { app: 'rbac-check' } };
      (job.spec as NonNullable<V1Job['spec']>).template.metadata = { labels: { app: 'rbac-check' } };
      await workerBatch.createNamespacedJob({ namespace, body: job });
      expect((await workerBatch.listNamespacedJob({ namespace, labelSelector: 'app=rbac-check' })).items).toHaveLength(
        1,
      );
      await eventually(async () =>
        condition(await workerBatch.readNamespacedJob({ name: 'rbac-check', namespace }), 'Complete'),
      );
      const pod = await jobPod('rbac-check', namespace, workerCore);
      const name = pod.metadata?.name as string;
      expect((await workerCore.readNamespacedPod({ name, namespace })).status?.phase).toBe('Succeeded');
      expect(await workerCore.readNamespacedPodLog({ name, namespace, tailLines: 10 })).toBe('as the worker\n');
      await eventually(() => (seen.includes('ADDED Job') && seen.includes('ADDED Pod') ? true : undefined));
      await workerBatch.deleteNamespacedJob({ name: 'rbac-check', namespace, propagationPolicy: 'Background' });
    } finally {
      for (const w of watches) w.abort();
    }
  });

  it("forbids the worker's ServiceAccount what the Role does not grant", async () => {
    const workerBatch = worker.makeApiClient(BatchV1Api);
    const workerCore = worker.makeApiClient(CoreV1Api);
    const attempts: Array<[string, () => Promise<unknown>]> = [
      ['read Secrets', () => workerCore.listNamespacedSecret({ namespace: 'rein-rollouts' })],
      [
        'create Pods directly',
        () =>
          workerCore.createNamespacedPod({
            namespace: 'rein-rollouts',
            body: { metadata: { name: 'direct' }, spec: { containers: [{ name: 'main', image: NODE_IMAGE }] } },
          }),
      ],
      [
        'create Jobs in another namespace',
        () => workerBatch.createNamespacedJob({ namespace: 'default', body: nodeJob('elsewhere', '') }),
      ],
      ['update Jobs', () => workerBatch.patchNamespacedJob({ name: 'any', namespace: 'rein-rollouts', body: {} })],
    ];
    for (const [what, attempt] of attempts) {
      const err = await attempt().then(
        () => new Error(`the worker could ${what}`),
        (e: unknown) => e,
      );
      expect(errorCode(err), what).toBe(403);
      expect(String((err as { body?: unknown }).body), what).toContain(
        'system:serviceaccount:rein-rollouts:rein-worker',
      );
    }
  });
});

describe("the control plane's end", () => {
  it('stops etcd, the apiserver and the controller-manager and leaves no files behind', async () => {
    const pids = plane.pids();
    expect(pids).toHaveLength(3);
    expect(pids.every(isRunning)).toBe(true);
    await agent.close();
    await plane.close();
    expect(pids.filter(isRunning)).toEqual([]);
    expect(existsSync(path.dirname(plane.kubeconfigFile))).toBe(false);
  });
});
