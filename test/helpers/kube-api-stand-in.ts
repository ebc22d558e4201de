/**
 * An in-process stand-in for the part of the Kubernetes REST API that Rein's Job runner uses:
 * batch/v1 Jobs and v1 Pods (create, read, list, watch, delete, pod logs), behind a simulated
 * job controller, scheduler and kubelet. No cluster is reachable from the development machines,
 * so the runner is tested against this with the official @kubernetes/client-node, unchanged.
 *
 * Objects, errors (`Status`), watch streams and the order of state changes follow the real API
 * server. A pod's first container runs FOR REAL as a local child process:
 * - its image is not used: images listed in `images` "pull" (every image when `images` is
 *   unset); any other stays Pending with ErrImagePull, then ImagePullBackOff.
 * - argv = `command` + `args`, command[0] found on PATH (without `command`, `args` alone, as for
 *   an image without ENTRYPOINT); `workingDir` is the process's cwd.
 * - env = the container's `env` entries that have a `value`, plus the host's PATH and HOME so
 *   binaries resolve; an entry with `valueFrom` leaves the pod in CreateContainerConfigError.
 * - terminationMessagePath (default /dev/termination-log) is mapped to a per-pod temp file: every
 *   occurrence of that path in command, args and env values is replaced by the temp file's path.
 *   That is how a harness that writes its result to /dev/termination-log (told so by an env var
 *   or an argument) does so here; the file becomes `state.terminated.message` as on a node.
 * - stdout and stderr together are the pod's log. The process gets its own process group, which
 *   is killed when the main process exits (as a container's processes die with it).
 *
 * Not simulated: other containers of a pod, init containers, parallelism/completions above 1,
 * the exponential back-off between retries, PATCH/PUT, pagination (`limit`/`continue`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

export interface KubeStandInOptions {
  /** Bearer token required on every request (401 otherwise). Default 'stand-in-token'. */
  token?: string;
  /** Images that "pull"; any other stays Pending in ErrImagePull/ImagePullBackOff. Default: all. */
  images?: string[];
  /** Node capacity in pods; more stay Pending/Unschedulable until capacity frees. Default: no limit. */
  maxRunningPods?: number;
  /** Delay between binding a pod and starting its container (scheduling, pull). Default 50 ms. */
  startDelayMs?: number;
  /** Watch events kept for resuming watches; older resourceVersions get 410 Expired. Default 1000. */
  eventHistory?: number;
}

export interface KubeStandIn {
  url: string;
  token: string;
  /** A config for the stand-in: cluster, user with the bearer token, namespace 'default'. */
  kubeConfig(): KubeConfig;
  /** The next `n` requests matching `match` (after authentication) fail with `status`. */
  failNextRequests(n: number, status: 500 | 429 | 503, match?: { method?: string; pathIncludes?: string }): void;
  /** Evicts a pod as node pressure would: SIGKILL, phase Failed, reason 'Evicted'; `reason` becomes status.message. */
  evictPod(namespace: string, name: string, reason?: string): void;
  jobsCreated(): number;
  /** Pods in phase Running. */
  runningPods(): number;
  close(): Promise<void>;
}

// The API's objects are open-ended JSON; typing them fully would add nothing to a test double.
type Obj = Record<string, any>;
type Resource = 'jobs' | 'pods';
type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';
interface StoreEvent { rv: number; resource: Resource; type: EventType; object: Obj }

const NODE_NAME = 'stand-in-node';
const BOOKMARK_INTERVAL_MS = 5_000;
const MAX_MESSAGE_BYTES = 4096;
const FALLBACK_LOG_LINES = 80;
const FALLBACK_LOG_BYTES = 2048;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// Kubernetes' own alphabet for generated name suffixes (no vowels, no look-alike characters).
const SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

/** metav1.Time has second precision. */
const timestamp = (ms = Date.now()): string => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
const randomSuffix = (): string => Array.from({ length: 5 }, () => SUFFIX_CHARS[randomInt(SUFFIX_CHARS.length)]).join('');

class HttpError extends Error {
  constructor(readonly code: number, readonly reason: string, message: string, readonly details?: Obj) {
    super(message);
  }
}

function statusObject(code: number, reason: string, message: string, details?: Obj): Obj {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details && { details }), code };
}

function invalid(kind: string, group: string, name: string, causes: Array<{ field: string; message: string }>): HttpError {
  const what = group ? `${kind}.${group}` : kind;
  const message = `${what} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(', ')}`;
  return new HttpError(422, 'Invalid', message, { name, group, kind, causes: causes.map((c) => ({ reason: 'FieldValueInvalid', ...c })) });
}

// ---------------------------------------------------------------------------------------------
// The store: objects, one global resourceVersion counter, a bounded event history for watches.

class Store {
  private rv = 0;
  private expiredUpTo = 0;
  private readonly objects: Record<Resource, Map<string, Obj>> = { jobs: new Map(), pods: new Map() };
  private readonly history: StoreEvent[] = [];
  private readonly listeners = new Set<(event: StoreEvent) => void>();

  constructor(private readonly historyLimit: number) {}

  get resourceVersion(): string {
    return String(this.rv);
  }

  get(resource: Resource, namespace: string, name: string): Obj | undefined {
    return this.objects[resource].get(`${namespace}/${name}`);
  }

  /** In creation order, optionally one namespace's. */
  all(resource: Resource, namespace?: string): Obj[] {
    return [...this.objects[resource].values()].filter((o) => namespace === undefined || o.metadata.namespace === namespace);
  }

  has(resource: Resource, obj: Obj): boolean {
    return this.get(resource, obj.metadata.namespace, obj.metadata.name) === obj;
  }

  add(resource: Resource, obj: Obj): void {
    this.objects[resource].set(`${obj.metadata.namespace}/${obj.metadata.name}`, obj);
    this.record(resource, 'ADDED', obj);
  }

  /** Applies `change` and records it, unless the object is gone or nothing changed. */
  update(resource: Resource, obj: Obj, change: (obj: Obj) => void): void {
    if (!this.has(resource, obj)) return;
    const before = JSON.stringify(obj);
    change(obj);
    if (JSON.stringify(obj) !== before) this.record(resource, 'MODIFIED', obj);
  }

  remove(resource: Resource, obj: Obj): void {
    if (!this.has(resource, obj)) return;
    this.objects[resource].delete(`${obj.metadata.namespace}/${obj.metadata.name}`);
    this.record(resource, 'DELETED', obj);
  }

  /** Events after `rv`, or undefined when some were already dropped (410 Expired). */
  since(rv: number): StoreEvent[] | undefined {
    if (rv < this.expiredUpTo) return undefined;
    return this.history.filter((e) => e.rv > rv);
  }

  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(resource: Resource, type: EventType, obj: Obj): void {
    this.rv += 1;
    obj.metadata.resourceVersion = String(this.rv);
    const event = { rv: this.rv, resource, type, object: structuredClone(obj) };
    this.history.push(event);
    if (this.history.length > this.historyLimit) this.expiredUpTo = this.history.shift()!.rv;
    for (const listener of this.listeners) listener(event);
  }
}

// ---------------------------------------------------------------------------------------------
// Selectors.

type Predicate = (obj: Obj) => boolean;

/** Kubernetes label selector syntax: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`. */
function parseLabelSelector(selector: string): Predicate {
  const requirements = splitOutsideParens(selector).map((part) => parseRequirement(part.trim()));
  return (obj) => {
    const labels: Record<string, string> = obj.metadata?.labels ?? {};
    return requirements.every((matches) => matches(labels));
  };
}

function splitOutsideParens(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const char of text) {
    if (char === '(') depth += 1;
    if (char === ')') depth -= 1;
    if (char === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts.filter((p) => p.trim() !== '');
}

function parseRequirement(text: string): (labels: Record<string, string>) => boolean {
  const set = /^([\w./-]+)\s+(in|notin)\s+\(([^()]*)\)$/.exec(text);
  if (set) {
    const [, key, op, list] = set as unknown as [string, string, string, string];
    const values = list.split(',').map((v) => v.trim());
    return op === 'in'
      ? (labels) => key in labels && values.includes(labels[key]!)
      : (labels) => !(key in labels) || !values.includes(labels[key]!);
  }
  const compare = /^([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)$/.exec(text);
  if (compare) {
    const [, key, op, value] = compare as unknown as [string, string, string, string];
    // `!=` matches objects without the label, as in Kubernetes.
    return op === '!=' ? (labels) => labels[key] !== value : (labels) => labels[key] === value;
  }
  const exists = /^(!?)\s*([\w./-]+)$/.exec(text);
  if (exists) {
    const [, not, key] = exists as unknown as [string, string, string];
    return not ? (labels) => !(key in labels) : (labels) => key in labels;
  }
  throw new HttpError(400, 'BadRequest', `unable to parse requirement: found '${text}', expected: in, notin, =, ==, !=, gt, lt`);
}

/** Field selectors on dotted paths: `metadata.name=x`, `status.phase!=Running`. */
function parseFieldSelector(selector: string): Predicate {
  const requirements = selector.split(',').filter(Boolean).map((part) => {
    const match = /^([\w.]+)\s*(==|=|!=)\s*(.*)$/.exec(part.trim());
    if (!match) throw new HttpError(400, 'BadRequest', `invalid field selector: '${part}'`);
    const [, field, op, value] = match as unknown as [string, string, string, string];
    return (obj: Obj) => {
      const actual = String(field.split('.').reduce<Obj | undefined>((o, k) => o?.[k], obj) ?? '');
      return op === '!=' ? actual !== value : actual === value;
    };
  });
  return (obj) => requirements.every((matches) => matches(obj));
}

// ---------------------------------------------------------------------------------------------
// Pods and jobs as objects.

const isTerminal = (pod: Obj): boolean => pod.status.phase === 'Succeeded' || pod.status.phase === 'Failed';
const isActive = (pod: Obj): boolean => !isTerminal(pod) && !pod.metadata.deletionTimestamp;
const isTerminating = (pod: Obj): boolean => !isTerminal(pod) && Boolean(pod.metadata.deletionTimestamp);
const isReady = (pod: Obj): boolean => isActive(pod) && pod.status.containerStatuses?.[0]?.ready === true;
const ownerUid = (pod: Obj): string | undefined => pod.metadata.ownerReferences?.[0]?.uid;
const isFinished = (job: Obj): boolean =>
  (job.status.conditions ?? []).some((c: Obj) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');

/** Sets a condition, keeping lastTransitionTime when its status did not change. */
function setCondition(obj: Obj, type: string, status: 'True' | 'False', reason?: string, message?: string): void {
  const conditions: Obj[] = (obj.status.conditions ??= []);
  const old = conditions.find((c) => c.type === type);
  const condition = {
    type, status, lastProbeTime: null,
    lastTransitionTime: old?.status === status ? old.lastTransitionTime : timestamp(),
    ...(reason && { reason }), ...(message && { message }),
  };
  if (old) conditions[conditions.indexOf(old)] = condition;
  else conditions.push(condition);
}

function jobConditions(type: 'Complete' | 'Failed', reason: string, message: string): Obj[] {
  const now = timestamp();
  const condition = (conditionType: string): Obj => ({ type: conditionType, status: 'True', lastProbeTime: now, lastTransitionTime: now, reason, message });
  return type === 'Complete' ? [condition('SuccessCriteriaMet'), condition('Complete')] : [condition('FailureTarget'), condition('Failed')];
}

/** Validates a submitted Job and fills in what the API server would. */
function newJob(namespace: string, body: Obj | undefined): Obj {
  const metadata: Obj = body?.metadata ?? {};
  if (metadata.namespace && metadata.namespace !== namespace) {
    throw new HttpError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
  }
  const name: string = metadata.name || (metadata.generateName ? `${String(metadata.generateName).slice(0, 58)}${randomSuffix()}` : '');
  const template: Obj = body?.spec?.template ?? {};
  const podSpec: Obj = template.spec ?? {};
  const causes: Array<{ field: string; message: string }> = [];
  if (!name) causes.push({ field: 'metadata.name', message: 'Required value: name or generateName is required' });
  else if (name.length > 63 || !DNS_LABEL.test(name)) {
    causes.push({ field: 'metadata.name', message: `Invalid value: "${name}": must be a lowercase RFC 1123 label of at most 63 characters` });
  }
  if (podSpec.restartPolicy !== 'Never' && podSpec.restartPolicy !== 'OnFailure') {
    const got = podSpec.restartPolicy === undefined ? 'Required value' : `Unsupported value: "${podSpec.restartPolicy}"`;
    causes.push({ field: 'spec.template.spec.restartPolicy', message: `${got}: supported values: "OnFailure", "Never"` });
  }
  const containers: Obj[] = Array.isArray(podSpec.containers) ? podSpec.containers : [];
  if (containers.length === 0) causes.push({ field: 'spec.template.spec.containers', message: 'Required value' });
  containers.forEach((c, i) => {
    if (!c.name || !DNS_LABEL.test(c.name)) causes.push({ field: `spec.template.spec.containers[${i}].name`, message: `Invalid value: "${c.name ?? ''}"` });
    if (!c.image) causes.push({ field: `spec.template.spec.containers[${i}].image`, message: 'Required value' });
  });
  if (causes.length) throw invalid('Job', 'batch', name, causes);

  const uid = randomUUID();
  const templateLabels = {
    ...template.metadata?.labels,
    'batch.kubernetes.io/controller-uid': uid, 'batch.kubernetes.io/job-name': name, 'controller-uid': uid, 'job-name': name,
  };
  return {
    apiVersion: 'batch/v1', kind: 'Job',
    metadata: {
      ...metadata, name, namespace, uid, generation: 1, creationTimestamp: timestamp(),
      // batch/v1 defaulting: a Job without labels takes its template's (as submitted).
      labels: metadata.labels ?? template.metadata?.labels,
    },
    spec: {
      parallelism: 1, completions: 1, backoffLimit: 6, completionMode: 'NonIndexed', suspend: false,
      manualSelector: false, podReplacementPolicy: 'TerminatingOrFailed',
      ...body?.spec,
      selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } },
      template: { metadata: { ...template.metadata, labels: templateLabels }, spec: defaultPodSpec(podSpec) },
    },
    status: {},
  };
}

function defaultPodSpec(spec: Obj): Obj {
  return {
    dnsPolicy: 'ClusterFirst', schedulerName: 'default-scheduler', securityContext: {}, terminationGracePeriodSeconds: 30,
    ...spec,
    containers: (spec.containers as Obj[]).map((c) => ({
      resources: {}, terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File',
      imagePullPolicy: /:[^/]+$/.test(c.image) && !String(c.image).endsWith(':latest') ? 'IfNotPresent' : 'Always',
      ...c,
    })),
  };
}

// ---------------------------------------------------------------------------------------------
// The cluster: job controller, scheduler and kubelet over the store.

interface Container {
  process?: ChildProcess;
  log: Buffer[];
  followers: Set<(chunk: Buffer | null) => void>;
  termFile: string;
  containerID: string;
  startedAt?: string;
  killTimer?: NodeJS.Timeout;
  evictedMessage?: string;
}

class Cluster {
  readonly store: Store;
  created = 0;
  private readonly containers = new Map<string, Container>(); // by pod uid
  private readonly counted = new Set<string>(); // pod uids a job has counted as succeeded/failed
  private readonly tallies = new Map<string, { succeeded: number; failed: number }>(); // by job uid
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly dirtyJobs = new Set<string>();
  private scheduling = false;
  private closed = false;

  constructor(private readonly options: KubeStandInOptions, private readonly tmpDir: string) {
    this.store = new Store(options.eventHistory ?? 1000);
    this.store.subscribe((event) => this.observe(event));
  }

  createJob(namespace: string, body: Obj | undefined): Obj {
    const job = newJob(namespace, body);
    if (this.store.get('jobs', namespace, job.metadata.name)) {
      throw new HttpError(409, 'AlreadyExists', `jobs.batch "${job.metadata.name}" already exists`, { name: job.metadata.name, group: 'batch', kind: 'jobs' });
    }
    this.store.add('jobs', job);
    this.created += 1;
    this.enqueue(job.metadata.uid);
    return structuredClone(job);
  }

  /** Returns what the API answers: the object while finalizers hold it, else a Status. */
  deleteJob(job: Obj, policy: string, graceSeconds?: number): Obj {
    const pods = this.podsOf(job);
    if (policy === 'Background') {
      this.store.remove('jobs', job);
      pods.forEach((pod) => this.deletePod(pod, graceSeconds));
      const { name, uid } = job.metadata;
      return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, group: 'batch', kind: 'jobs', uid } };
    }
    const finalizer = policy === 'Foreground' ? 'foregroundDeletion' : 'orphan';
    this.store.update('jobs', job, (j) => {
      j.metadata.deletionTimestamp = timestamp();
      j.metadata.deletionGracePeriodSeconds = 0;
      j.metadata.finalizers = [finalizer];
    });
    const answer = structuredClone(job);
    if (policy === 'Foreground') {
      pods.forEach((pod) => this.deletePod(pod, graceSeconds));
      this.enqueue(job.metadata.uid); // removes the job once its pods are gone
    } else {
      // The garbage collector's orphan finalizer: dependents lose their owner, keep running.
      pods.forEach((pod) => this.store.update('pods', pod, (p) => delete p.metadata.ownerReferences));
      this.store.remove('jobs', job);
    }
    return answer;
  }

  /** Graceful deletion: SIGTERM, SIGKILL after the grace period, gone once the process is. */
  deletePod(pod: Obj, graceSeconds: number = pod.spec.terminationGracePeriodSeconds ?? 30): void {
    if (pod.metadata.deletionTimestamp) return;
    const container = this.containers.get(pod.metadata.uid);
    const running = container?.process;
    if (!running) {
      this.store.remove('pods', pod);
      return;
    }
    this.store.update('pods', pod, (p) => {
      p.metadata.deletionTimestamp = timestamp(Date.now() + graceSeconds * 1000);
      p.metadata.deletionGracePeriodSeconds = graceSeconds;
    });
    signalGroup(running, graceSeconds > 0 ? 'SIGTERM' : 'SIGKILL');
    container.killTimer = this.later(graceSeconds * 1000, () => signalGroup(running, 'SIGKILL'));
  }

  evictPod(namespace: string, name: string, message = 'The node was low on resource: memory.'): void {
    const pod = this.store.get('pods', namespace, name);
    if (!pod) throw new Error(`no pod ${namespace}/${name}`);
    const container = this.containers.get(pod.metadata.uid);
    if (container?.process) {
      container.evictedMessage = message; // onExit marks the pod evicted
      signalGroup(container.process, 'SIGKILL');
    } else if (!isTerminal(pod)) {
      this.store.update('pods', pod, (p) => markEvicted(p, message));
    }
  }

  runningPods(): number {
    return this.store.all('pods').filter((p) => p.status.phase === 'Running').length;
  }

  containerOf(pod: Obj): Container | undefined {
    return this.containers.get(pod.metadata.uid);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timers.forEach((t) => clearTimeout(t));
    const exits = [...this.containers.values()].flatMap(({ process }) => {
      if (!process || process.exitCode !== null || process.signalCode !== null) return [];
      const exited = new Promise((resolve) => process.once('exit', resolve));
      signalGroup(process, 'SIGKILL');
      return [exited];
    });
    await Promise.all(exits);
    fs.rmSync(this.tmpDir, { recursive: true, force: true });
  }

  private later(ms: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.closed) fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  // Like the real controllers, react to changes asynchronously and idempotently.
  private observe(event: StoreEvent): void {
    if (event.resource !== 'pods') return;
    const pod = event.object;
    const owner = ownerUid(pod);
    const gone = event.type === 'DELETED' || isTerminal(pod) || pod.metadata.deletionTimestamp;
    if (owner && gone && !this.counted.has(pod.metadata.uid)) {
      // With podReplacementPolicy TerminatingOrFailed a pod being deleted already counts as failed.
      this.counted.add(pod.metadata.uid);
      this.tally(owner)[pod.status.phase === 'Succeeded' ? 'succeeded' : 'failed'] += 1;
    }
    if (owner) this.enqueue(owner);
    if (!this.scheduling) {
      this.scheduling = true;
      this.later(0, () => {
        this.scheduling = false;
        this.schedule();
      });
    }
  }

  private tally(jobUid: string): { succeeded: number; failed: number } {
    let tally = this.tallies.get(jobUid);
    if (!tally) this.tallies.set(jobUid, (tally = { succeeded: 0, failed: 0 }));
    return tally;
  }

  private enqueue(jobUid: string): void {
    if (this.dirtyJobs.size === 0) this.later(0, () => this.syncDirtyJobs());
    this.dirtyJobs.add(jobUid);
  }

  private syncDirtyJobs(): void {
    const uids = new Set(this.dirtyJobs);
    this.dirtyJobs.clear();
    this.store.all('jobs').filter((job) => uids.has(job.metadata.uid)).forEach((job) => this.syncJob(job));
  }

  private podsOf(job: Obj): Obj[] {
    return this.store.all('pods', job.metadata.namespace).filter((pod) => ownerUid(pod) === job.metadata.uid);
  }

  /** The job controller's reconcile: verdict, pods to create or delete, status. */
  private syncJob(job: Obj, deadlineExceeded = false): void {
    let pods = this.podsOf(job);
    if (job.metadata.deletionTimestamp) {
      if (pods.length === 0) this.store.remove('jobs', job);
      return;
    }
    const { succeeded, failed } = this.tally(job.metadata.uid);
    const verdict = isFinished(job) ? undefined : this.verdict(job, pods, succeeded, failed, deadlineExceeded);
    if (verdict?.type === 'Failed') pods.filter(isActive).forEach((pod) => this.deletePod(pod));
    if (!verdict && !isFinished(job) && !pods.some(isActive)) pods = [...pods, this.createPod(job)];
    const starting = !job.status.startTime;
    this.store.update('jobs', job, (j) => {
      const count = (test: (pod: Obj) => boolean): number => pods.filter(test).length;
      // Zero counts are omitted (omitempty), ready and terminating are not: as the real API.
      j.status = {
        ...j.status, startTime: j.status.startTime ?? timestamp(),
        active: count(isActive) || undefined, ready: count(isReady), terminating: count(isTerminating),
        succeeded: succeeded || undefined, failed: failed || undefined, uncountedTerminatedPods: {},
      };
      if (verdict) j.status.conditions = [...(j.status.conditions ?? []), ...jobConditions(verdict.type, verdict.reason, verdict.message)];
      if (verdict?.type === 'Complete') j.status.completionTime = timestamp();
    });
    const deadline = job.spec.activeDeadlineSeconds;
    if (starting && typeof deadline === 'number') {
      this.later(deadline * 1000, () => this.store.has('jobs', job) && !isFinished(job) && this.syncJob(job, true));
    }
    const ttl = job.spec.ttlSecondsAfterFinished;
    if (verdict && typeof ttl === 'number') this.later(ttl * 1000, () => this.store.has('jobs', job) && this.deleteJob(job, 'Background'));
  }

  private verdict(job: Obj, pods: Obj[], succeeded: number, failed: number, deadlineExceeded: boolean) {
    if (deadlineExceeded) return { type: 'Failed', reason: 'DeadlineExceeded', message: 'Job was active longer than specified deadline' } as const;
    if (succeeded >= 1) return { type: 'Complete', reason: 'CompletionsReached', message: 'Reached expected number of succeeded pods' } as const;
    const limit: number = job.spec.backoffLimit;
    const restarts = pods.filter((p) => !isTerminal(p)).reduce((sum, p) => sum + (p.status.containerStatuses?.[0]?.restartCount ?? 0), 0);
    // The job controller's rule for OnFailure: container restarts count against the limit.
    const restartsExceeded = job.spec.template.spec.restartPolicy === 'OnFailure' && restarts >= Math.max(limit, 1);
    if (failed > limit || restartsExceeded) {
      return { type: 'Failed', reason: 'BackoffLimitExceeded', message: 'Job has reached the specified backoff limit' } as const;
    }
    return undefined;
  }

  private createPod(job: Obj): Obj {
    const template = job.spec.template;
    const pod: Obj = {
      apiVersion: 'v1', kind: 'Pod',
      metadata: {
        name: `${job.metadata.name}-${randomSuffix()}`, generateName: `${job.metadata.name}-`, namespace: job.metadata.namespace,
        uid: randomUUID(), creationTimestamp: timestamp(), labels: { ...template.metadata.labels },
        ...(template.metadata.annotations && { annotations: { ...template.metadata.annotations } }),
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: job.metadata.name, uid: job.metadata.uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: structuredClone(template.spec),
      status: { phase: 'Pending', qosClass: 'BestEffort' },
    };
    this.store.add('pods', pod);
    return pod;
  }

  /** Binds pending pods in creation order while the node has room. */
  private schedule(): void {
    const pods = this.store.all('pods');
    let used = pods.filter((p) => p.spec.nodeName && !isTerminal(p)).length;
    for (const pod of pods.filter((p) => !p.spec.nodeName && !p.metadata.deletionTimestamp && !isTerminal(p))) {
      if (used < (this.options.maxRunningPods ?? Infinity)) {
        used += 1;
        this.bind(pod);
      } else {
        this.store.update('pods', pod, (p) => setCondition(p, 'PodScheduled', 'False', 'Unschedulable', '0/1 nodes are available: 1 Too many pods.'));
      }
    }
  }

  private bind(pod: Obj): void {
    const container = pod.spec.containers[0];
    this.store.update('pods', pod, (p) => {
      p.spec.nodeName = NODE_NAME;
      p.status.hostIP = '127.0.0.1';
      p.status.startTime = timestamp();
      setCondition(p, 'PodReadyToStartContainers', 'False');
      setCondition(p, 'Initialized', 'True');
      setCondition(p, 'Ready', 'False', 'ContainersNotReady', `containers with unready status: [${container.name}]`);
      setCondition(p, 'ContainersReady', 'False', 'ContainersNotReady', `containers with unready status: [${container.name}]`);
      setCondition(p, 'PodScheduled', 'True');
      p.status.containerStatuses = [containerStatus(container, { waiting: { reason: 'ContainerCreating' } })];
    });
    this.later(this.options.startDelayMs ?? 50, () => this.startContainer(pod));
  }

  private startContainer(pod: Obj): void {
    if (!this.store.has('pods', pod) || pod.metadata.deletionTimestamp || isTerminal(pod)) return;
    const spec = pod.spec.containers[0];
    if (this.options.images && !this.options.images.includes(spec.image)) return this.failPull(pod);
    const unsupported = (spec.env ?? []).find((e: Obj) => e.value === undefined && e.valueFrom !== undefined);
    if (unsupported) return this.setWaiting(pod, 'CreateContainerConfigError', `env "${unsupported.name}": valueFrom is not available on the stand-in`);
    const container = this.prepareContainer(pod);
    const termPath: string = spec.terminationMessagePath;
    const swap = (text: string): string => (termPath ? text.split(termPath).join(container.termFile) : text);
    const argv: string[] = [...(spec.command ?? []), ...(spec.args ?? [])].map(swap);
    if (argv.length === 0) return this.setWaiting(pod, 'CreateContainerError', 'no command specified');
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? os.homedir() };
    for (const entry of spec.env ?? []) env[entry.name] = swap(String(entry.value ?? ''));
    let child: ChildProcess;
    try {
      // A container runtime creates a missing working directory.
      if (spec.workingDir) fs.mkdirSync(spec.workingDir, { recursive: true });
      child = spawn(argv[0]!, argv.slice(1), { cwd: spec.workingDir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    } catch (error) {
      return this.onStartError(pod, container, `failed to start container process: ${String(error)}`);
    }
    container.process = child;
    const append = (chunk: Buffer): void => {
      container.log.push(chunk);
      container.followers.forEach((follow) => follow(chunk));
    };
    child.stdout!.on('data', append);
    child.stderr!.on('data', append);
    let started = false;
    child.once('spawn', () => {
      started = true;
      this.markRunning(pod, container);
    });
    child.once('error', (error: NodeJS.ErrnoException) => {
      const why = error.code === 'ENOENT' ? 'executable file not found in $PATH or working directory missing' : error.message;
      if (!started) this.onStartError(pod, container, `failed to start container process: exec: "${argv[0]}": ${why}`);
    });
    // When a container's main process exits, the rest of the container dies with it.
    child.once('exit', () => signalGroup(child, 'SIGKILL'));
    child.once('close', (code, signal) => {
      if (started) this.onExit(pod, container, code, signal);
    });
  }

  private prepareContainer(pod: Obj): Container {
    const existing = this.containers.get(pod.metadata.uid);
    const dir = path.join(this.tmpDir, pod.metadata.uid);
    fs.mkdirSync(dir, { recursive: true });
    const termFile = path.join(dir, 'termination-log');
    fs.writeFileSync(termFile, '');
    const container: Container = {
      log: [], followers: existing?.followers ?? new Set(), termFile, containerID: `containerd://${randomUUID().replaceAll('-', '')}`,
    };
    this.containers.set(pod.metadata.uid, container);
    return container;
  }

  private failPull(pod: Obj): void {
    const image = pod.spec.containers[0].image;
    this.setWaiting(pod, 'ErrImagePull', `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": not found`);
    this.later(this.options.startDelayMs ?? 50, () => this.setWaiting(pod, 'ImagePullBackOff', `Back-off pulling image "${image}"`));
  }

  private setWaiting(pod: Obj, reason: string, message: string): void {
    this.store.update('pods', pod, (p) => {
      p.status.containerStatuses[0].state = { waiting: { reason, message } };
    });
  }

  private markRunning(pod: Obj, container: Container): void {
    container.startedAt = timestamp();
    this.store.update('pods', pod, (p) => {
      p.status.phase = 'Running';
      p.status.podIP = '127.0.0.1';
      for (const type of ['PodReadyToStartContainers', 'Ready', 'ContainersReady']) setCondition(p, type, 'True');
      Object.assign(p.status.containerStatuses[0], {
        containerID: container.containerID, ready: true, started: true, state: { running: { startedAt: container.startedAt } },
      });
    });
  }

  private onStartError(pod: Obj, container: Container, message: string): void {
    container.process = undefined;
    container.startedAt = timestamp();
    const terminated = { exitCode: 128, reason: 'StartError', message, startedAt: container.startedAt, finishedAt: timestamp(), containerID: container.containerID };
    this.store.update('pods', pod, (p) => markTerminated(p, terminated, 'Failed'));
    if (pod.metadata.deletionTimestamp) this.store.remove('pods', pod);
  }

  private onExit(pod: Obj, container: Container, code: number | null, signal: NodeJS.Signals | null): void {
    container.process = undefined;
    clearTimeout(container.killTimer);
    container.followers.forEach((follow) => follow(null));
    if (this.closed) return;
    const exitCode = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
    const failed = exitCode !== 0 || container.evictedMessage !== undefined;
    const message = terminationMessage(container, pod.spec.containers[0], failed);
    const terminated = {
      exitCode, ...(signal && { signal: os.constants.signals[signal] }), reason: exitCode === 0 ? 'Completed' : 'Error',
      ...(message && { message }), startedAt: container.startedAt, finishedAt: timestamp(), containerID: container.containerID,
    };
    const restart = failed && !container.evictedMessage && !pod.metadata.deletionTimestamp && pod.spec.restartPolicy === 'OnFailure';
    if (restart) {
      this.store.update('pods', pod, (p) => {
        const status = p.status.containerStatuses[0];
        Object.assign(status, { lastState: { terminated }, restartCount: status.restartCount + 1, ready: false, started: false });
        status.state = { waiting: { reason: 'CrashLoopBackOff', message: `back-off restarting failed container=${status.name} pod=${p.metadata.name}` } };
        for (const type of ['Ready', 'ContainersReady']) setCondition(p, type, 'False', 'ContainersNotReady');
      });
      this.later(this.options.startDelayMs ?? 50, () => this.startContainer(pod));
      return;
    }
    this.store.update('pods', pod, (p) => {
      markTerminated(p, terminated, failed ? 'Failed' : 'Succeeded');
      if (container.evictedMessage !== undefined) markEvicted(p, container.evictedMessage);
    });
    if (pod.metadata.deletionTimestamp) this.store.remove('pods', pod);
  }
}

function markTerminated(pod: Obj, terminated: Obj, phase: 'Succeeded' | 'Failed'): void {
  pod.status.phase = phase;
  setCondition(pod, 'PodReadyToStartContainers', 'False');
  for (const type of ['Ready', 'ContainersReady']) setCondition(pod, type, 'False', 'PodCompleted');
  Object.assign(pod.status.containerStatuses[0], { ready: false, started: false, state: { terminated } });
}

function markEvicted(pod: Obj, message: string): void {
  pod.status.phase = 'Failed';
  pod.status.reason = 'Evicted';
  pod.status.message = message;
  setCondition(pod, 'DisruptionTarget', 'True', 'TerminationByKubelet', message);
}

function containerStatus(container: Obj, state: Obj): Obj {
  return { name: container.name, image: container.image, imageID: '', ready: false, started: false, restartCount: 0, state, lastState: {} };
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // The group is already gone.
  }
}

/** What the kubelet reports: the termination file, or with FallbackToLogsOnError the log's tail. */
function terminationMessage(container: Container, spec: Obj, failed: boolean): string {
  let file = '';
  try {
    file = fs.readFileSync(container.termFile).subarray(0, MAX_MESSAGE_BYTES).toString('utf8');
  } catch {
    // The container removed it: no message, as on a node.
  }
  if (file || !failed || spec.terminationMessagePolicy !== 'FallbackToLogsOnError') return file;
  const log = Buffer.concat(container.log).toString('utf8');
  const tail = log.split('\n').slice(-FALLBACK_LOG_LINES - 1).join('\n');
  return Buffer.from(tail).subarray(-FALLBACK_LOG_BYTES).toString('utf8');
}

// ---------------------------------------------------------------------------------------------
// HTTP.

const JOBS_PATH = /^\/apis\/batch\/v1\/namespaces\/([^/]+)\/jobs(?:\/([^/]+)(\/status)?)?$/;
const PODS_PATH = /^\/api\/v1\/namespaces\/([^/]+)\/pods(?:\/([^/]+)(\/log)?)?$/;
const KINDS: Record<Resource, { kind: string; apiVersion: string; group: string }> = {
  jobs: { kind: 'Job', apiVersion: 'batch/v1', group: 'batch' },
  pods: { kind: 'Pod', apiVersion: 'v1', group: '' },
};

interface Fault { remaining: number; status: 500 | 429 | 503; method?: string; pathIncludes?: string }

class ApiServer {
  readonly faults: Fault[] = [];
  private readonly watches = new Set<http.ServerResponse>();

  constructor(private readonly cluster: Cluster, private readonly token: string) {}

  handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.route(req, res).catch((error: unknown) => {
      if (res.headersSent) return void res.destroy();
      const e = error instanceof HttpError ? error : new HttpError(500, 'InternalError', `Internal error occurred: ${String(error)}`);
      if (e.code === 429) res.setHeader('retry-after', '1');
      sendJson(res, e.code, statusObject(e.code, e.reason, e.message, e.details));
    });
  }

  endWatches(): void {
    this.watches.forEach((res) => res.end());
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (req.headers.authorization !== `Bearer ${this.token}`) throw new HttpError(401, 'Unauthorized', 'Unauthorized');
    this.injectFault(req);
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const body = await readJson(req);
    const jobs = JOBS_PATH.exec(url.pathname);
    const pods = PODS_PATH.exec(url.pathname);
    const match = jobs ?? pods;
    if (!match) throw new HttpError(404, 'NotFound', 'the server could not find the requested resource');
    const resource: Resource = jobs ? 'jobs' : 'pods';
    const [namespace, name, sub] = [decodeURIComponent(match[1]!), match[2] && decodeURIComponent(match[2]), match[3]];
    const query = url.searchParams;
    if (!name && req.method === 'GET') {
      return ['true', '1'].includes(query.get('watch') ?? '') ? this.watch(res, resource, namespace, query) : this.list(res, resource, namespace, query);
    }
    if (!name && req.method === 'POST' && resource === 'jobs') return sendJson(res, 201, this.cluster.createJob(namespace, body));
    if (!name) throw methodNotAllowed(req);
    const obj = this.cluster.store.get(resource, namespace, name);
    if (!obj) throw new HttpError(404, 'NotFound', `${resource}${jobs ? '.batch' : ''} "${name}" not found`, { name, group: KINDS[resource].group, kind: resource });
    if (req.method === 'GET' && sub === '/log') return this.log(res, obj, query);
    if (req.method === 'GET') return sendJson(res, 200, obj);
    if (req.method === 'DELETE' && !sub) return sendJson(res, 200, this.delete(resource, obj, query, body));
    throw methodNotAllowed(req);
  }

  private injectFault(req: http.IncomingMessage): void {
    const fault = this.faults.find((f) =>
      f.remaining > 0 && (!f.method || f.method.toUpperCase() === req.method) && (!f.pathIncludes || (req.url ?? '').includes(f.pathIncludes)));
    if (!fault) return;
    fault.remaining -= 1;
    const reasons = { 500: 'InternalError', 429: 'TooManyRequests', 503: 'ServiceUnavailable' } as const;
    throw new HttpError(fault.status, reasons[fault.status], `injected fault: ${reasons[fault.status]}`, fault.status === 429 ? { retryAfterSeconds: 1 } : undefined);
  }

  private delete(resource: Resource, obj: Obj, query: URLSearchParams, body: Obj | undefined): Obj {
    const policy = query.get('propagationPolicy') ?? body?.propagationPolicy ?? (resource === 'jobs' ? 'Orphan' : 'Background');
    if (!['Orphan', 'Background', 'Foreground'].includes(policy)) {
      throw invalid('DeleteOptions', '', '', [{ field: 'propagationPolicy', message: `Unsupported value: "${policy}"` }]);
    }
    const grace = query.get('gracePeriodSeconds') ?? body?.gracePeriodSeconds;
    const graceSeconds = grace === undefined || grace === null ? undefined : Number(grace);
    if (graceSeconds !== undefined && !(Number.isInteger(graceSeconds) && graceSeconds >= 0)) {
      throw new HttpError(400, 'BadRequest', `invalid gracePeriodSeconds: ${String(grace)}`);
    }
    if (resource === 'jobs') return this.cluster.deleteJob(obj, policy, graceSeconds);
    this.cluster.deletePod(obj, graceSeconds);
    return obj;
  }

  private matcher(resource: Resource, namespace: string, query: URLSearchParams): Predicate {
    const labels = parseLabelSelector(query.get('labelSelector') ?? '');
    const fields = parseFieldSelector(query.get('fieldSelector') ?? '');
    return (obj) => obj.kind === KINDS[resource].kind && obj.metadata.namespace === namespace && labels(obj) && fields(obj);
  }

  private list(res: http.ServerResponse, resource: Resource, namespace: string, query: URLSearchParams): void {
    const matches = this.matcher(resource, namespace, query);
    const { kind, apiVersion } = KINDS[resource];
    // List items carry no kind/apiVersion, and come in key (name) order, as from etcd.
    const items = this.cluster.store.all(resource, namespace).filter(matches)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
      .map(({ kind: _kind, apiVersion: _apiVersion, ...rest }) => rest);
    sendJson(res, 200, { kind: `${kind}List`, apiVersion, metadata: { resourceVersion: this.cluster.store.resourceVersion }, items });
  }

  /** Newline-delimited watch events; starts with the current objects when no resourceVersion is given. */
  private watch(res: http.ServerResponse, resource: Resource, namespace: string, query: URLSearchParams): void {
    const matches = this.matcher(resource, namespace, query);
    const from = query.get('resourceVersion') ?? '';
    if (from !== '' && !/^\d+$/.test(from)) throw new HttpError(400, 'BadRequest', `invalid resource version: ${from}`);
    const store = this.cluster.store;
    const past = from === '' || from === '0' ? store.all(resource, namespace).map((object) => ({ type: 'ADDED', object })) : store.since(Number(from));
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    res.flushHeaders();
    const send = (type: string, object: Obj): void => void (res.writableEnded || res.write(`${JSON.stringify({ type, object })}\n`));
    if (!past) {
      send('ERROR', statusObject(410, 'Expired', `too old resource version: ${from} (${store.resourceVersion})`));
      return void res.end();
    }
    past.filter((e) => matches(e.object)).forEach((e) => send(e.type, e.object));
    const unsubscribe = store.subscribe((e) => e.resource === resource && matches(e.object) && send(e.type, e.object));
    const { kind, apiVersion } = KINDS[resource];
    const bookmark = (): void => send('BOOKMARK', { kind, apiVersion, metadata: { resourceVersion: store.resourceVersion, creationTimestamp: null } });
    const bookmarks = query.get('allowWatchBookmarks') === 'true';
    const ticker = bookmarks ? setInterval(bookmark, BOOKMARK_INTERVAL_MS) : undefined;
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? 0);
    const timeout = timeoutSeconds > 0 ? setTimeout(() => (bookmarks && bookmark(), res.end()), timeoutSeconds * 1000) : undefined;
    this.watches.add(res);
    res.on('close', () => {
      unsubscribe();
      clearInterval(ticker);
      clearTimeout(timeout);
      this.watches.delete(res);
    });
  }

  private log(res: http.ServerResponse, pod: Obj, query: URLSearchParams): void {
    const names: string[] = pod.spec.containers.map((c: Obj) => c.name);
    const name = query.get('container') ?? (names.length === 1 ? names[0]! : undefined);
    const podName = pod.metadata.name;
    if (!name) throw new HttpError(400, 'BadRequest', `a container name must be specified for pod ${podName}, choose one of: [${names.join(' ')}]`);
    if (!names.includes(name)) throw new HttpError(400, 'BadRequest', `container ${name} is not valid for pod ${podName}`);
    const container = this.cluster.containerOf(pod);
    if (name !== names[0] || !container?.startedAt) {
      const waiting = pod.status.containerStatuses?.[0]?.state?.waiting?.reason;
      const why = { ErrImagePull: 'image can\'t be pulled', ImagePullBackOff: 'trying and failing to pull image' }[waiting as string] ?? waiting ?? 'ContainerCreating';
      throw new HttpError(400, 'BadRequest', `container "${name}" in pod "${podName}" is waiting to start: ${why}`);
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write(limitLog(Buffer.concat(container.log), query));
    if (query.get('follow') !== 'true' || !container.process) return void res.end();
    const follow = (chunk: Buffer | null): void => void (res.writableEnded || (chunk ? res.write(chunk) : res.end()));
    container.followers.add(follow);
    res.on('close', () => container.followers.delete(follow));
  }
}

function limitLog(log: Buffer, query: URLSearchParams): Buffer {
  let text = log;
  const tailLines = query.get('tailLines');
  if (tailLines !== null) {
    const lines = text.toString('utf8').split(/(?<=\n)/);
    text = Buffer.from(Number(tailLines) > 0 ? lines.slice(-Number(tailLines)).join('') : '');
  }
  const limitBytes = Number(query.get('limitBytes') ?? 0);
  return limitBytes > 0 ? text.subarray(0, limitBytes) : text;
}

function methodNotAllowed(req: http.IncomingMessage): HttpError {
  return new HttpError(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource (${req.method})`);
}

function sendJson(res: http.ServerResponse, code: number, body: Obj): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readJson(req: http.IncomingMessage): Promise<Obj | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (!text) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Obj;
  } catch {
    // Falls through to the error below.
  }
  throw new HttpError(400, 'BadRequest', 'the body of the request was in an unknown format - accepted media types include: application/json');
}

// ---------------------------------------------------------------------------------------------

export async function startKubeStandIn(options: KubeStandInOptions = {}): Promise<KubeStandIn> {
  const token = options.token ?? 'stand-in-token';
  const cluster = new Cluster(options, fs.mkdtempSync(path.join(os.tmpdir(), 'kube-stand-in-')));
  const api = new ApiServer(cluster, token);
  const server = http.createServer((req, res) => api.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    token,
    kubeConfig: () => kubeConfigFor(url, token),
    failNextRequests: (n, status, match) => void api.faults.push({ remaining: n, status, ...match }),
    evictPod: (namespace, name, reason) => cluster.evictPod(namespace, name, reason),
    jobsCreated: () => cluster.created,
    runningPods: () => cluster.runningPods(),
    close: async () => {
      api.endWatches();
      await cluster.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function kubeConfigFor(server: string, token: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    // client-node refuses plain http unless skipTLSVerify is set.
    clusters: [{ name: 'stand-in', server, skipTLSVerify: true }],
    users: [{ name: 'stand-in', token }],
    contexts: [{ name: 'stand-in', cluster: 'stand-in', user: 'stand-in', namespace: 'default' }],
    currentContext: 'stand-in',
  });
  return config;
}
