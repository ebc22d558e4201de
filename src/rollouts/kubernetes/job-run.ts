import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { V1ContainerStatus, V1Job, V1Pod } from '@kubernetes/client-node';
import { messageOf, noPodCreated, statusOf } from '../../kubernetes/api.js';
import type { HarnessLaunch, HarnessRun } from '../executor.js';
import type { HarnessCluster } from './cluster.js';
import { newestPod, type Watching } from './job-watch.js';

/** The container cannot start, and waiting will not change that: the spec or the image must be fixed. */
const HOPELESS_WAITING = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'ErrImageNeverPull',
]);
const LOG_TAIL_LINES = 200;

/**
 * Follows one rollout attempt's Job to its end, on the informers' changes: the run's timeout
 * starts when its container starts running; time spent pending has its own limit.
 */
export function followJob(
  cluster: HarnessCluster,
  jobName: string,
  launch: HarnessLaunch,
  watch: Watching,
): Promise<HarnessRun> {
  return new Promise<HarnessRun>((resolve) => new JobRun(cluster, jobName, launch, watch, resolve).start());
}

/** Deletes a Job and its pods; one already gone is fine. */
export async function deleteJob(cluster: HarnessCluster, name: string): Promise<void> {
  try {
    await cluster
      .apis()
      .batch.deleteNamespacedJob({ name, namespace: cluster.namespace, propagationPolicy: 'Background' });
  } catch (err) {
    if (statusOf(err) !== 404) throw err;
  }
}

class JobRun {
  private startedAt: number | null = null;
  private seen = false;
  private ended = false;
  private pendingTimer: NodeJS.Timeout | undefined;
  private runTimer: NodeJS.Timeout | undefined;
  // Handed back, the Job runs on: the next runner follows it (resume) instead of starting over.
  private readonly onAbort = () => this.end({ cancelled: true }, this.pod(), this.launch.handedBack?.() !== true);

  constructor(
    private readonly cluster: HarnessCluster,
    private readonly jobName: string,
    private readonly launch: HarnessLaunch,
    private readonly watch: Watching,
    private readonly resolve: (run: HarnessRun) => void,
  ) {}

  start(): void {
    this.pendingTimer = setTimeout(() => this.pendingTooLong(), this.cluster.settings.pendingTimeoutSeconds * 1000);
    this.watch.listeners.set(this.jobName, (deleted) => this.evaluate(deleted));
    this.launch.signal?.addEventListener('abort', this.onAbort, { once: true });
    if (this.launch.signal?.aborted) this.onAbort();
    this.evaluate(false);
  }

  private pod(): V1Pod | undefined {
    return newestPod(this.watch.pods, this.jobName, this.cluster.namespace);
  }

  private container(pod: V1Pod | undefined): V1ContainerStatus | undefined {
    const statuses = pod?.status?.containerStatuses ?? [];
    const name = this.cluster.settings.container;
    return name === undefined ? statuses[0] : statuses.find((s) => s.name === name);
  }

  private where(pod?: V1Pod): HarnessRun['where'] {
    return {
      namespace: this.cluster.namespace,
      job: this.jobName,
      ...(pod?.metadata?.name && { pod: pod.metadata.name, node: pod.spec?.nodeName }),
    };
  }

  private pendingTooLong(): void {
    const pod = this.pod();
    const scheduled = pod?.status?.conditions?.find((c) => c.type === 'PodScheduled');
    const why = !pod
      ? noPodCreated(this.jobName, this.cluster.namespace)
      : scheduled?.status === 'False'
        ? `${scheduled.reason}: ${scheduled.message ?? ''}`
        : (this.container(pod)?.state?.waiting?.reason ?? pod.status?.phase ?? 'Pending');
    this.end(
      {
        problem: {
          failureClass: 'infrastructure',
          reason: `the harness pod did not start within ${this.cluster.settings.pendingTimeoutSeconds} s (${why})`,
        },
      },
      pod,
      true,
    );
  }

  /** Re-reads the Job and its pod after a change (or its deletion) and ends the run when they say it is over. */
  private evaluate(deleted: boolean): void {
    if (this.ended) return;
    const job = this.watch.jobs.get(this.jobName, this.cluster.namespace);
    const pod = this.pod();
    if (deleted || (!job && this.seen)) {
      return this.end(
        {
          problem: {
            failureClass: 'infrastructure',
            reason: `Job ${this.jobName} was deleted while its rollout ran (not by Rein)`,
          },
        },
        pod,
        false,
      );
    }
    if (!job) return; // created, not yet seen by the informer
    this.seen = true;
    const container = this.container(pod);
    this.noteStart(container);
    const waiting = container?.state?.waiting;
    if (waiting?.reason && HOPELESS_WAITING.has(waiting.reason)) {
      return this.end(
        {
          problem: {
            failureClass: 'environment',
            reason: `the harness container cannot start: ${waiting.reason}${waiting.message ? `: ${waiting.message}` : ''}`,
          },
        },
        pod,
        true,
      );
    }
    const outcome = outcomeOf(job, pod, container);
    if (outcome) this.end(outcome, pod, false);
  }

  /** The container started running: the pending limit ends and the run's own timeout begins. */
  private noteStart(container: V1ContainerStatus | undefined): void {
    const running =
      container?.state?.running ??
      (container?.state?.terminated && { startedAt: container.state.terminated.startedAt });
    if (!running || this.startedAt !== null) return;
    const startedAt = running.startedAt ? new Date(running.startedAt).getTime() : Date.now();
    this.startedAt = startedAt;
    clearTimeout(this.pendingTimer);
    const left = Math.max(0, this.cluster.settings.timeoutSeconds * 1000 - (Date.now() - startedAt));
    this.runTimer = setTimeout(() => this.end({ timedOut: true, killedBy: 'SIGTERM' }, this.pod(), true), left);
  }

  private end(run: Partial<HarnessRun>, pod: V1Pod | undefined, removeJob: boolean): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.pendingTimer);
    clearTimeout(this.runTimer);
    this.watch.listeners.delete(this.jobName);
    this.launch.signal?.removeEventListener('abort', this.onAbort);
    void this.collect(pod, removeJob).then(({ logTail, finishedAt }) => {
      const seconds = this.startedAt === null ? 0 : ((finishedAt ?? Date.now()) - this.startedAt) / 1000;
      this.resolve({
        exitCode: null,
        killedBy: null,
        timedOut: false,
        cancelled: false,
        problem: null,
        ...run,
        logTail,
        where: this.where(pod),
        seconds,
      });
    });
  }

  /** The end of the pod's log and its termination message (the harness's output), then the Job goes if asked. */
  private async collect(
    seenPod: V1Pod | undefined,
    removeJob: boolean,
  ): Promise<{ logTail: string; finishedAt: number | undefined }> {
    const { namespace, settings } = this.cluster;
    let pod = seenPod;
    // Jobs and pods come on separate watches: the Job can be Complete before the pod's
    // termination (and its message, the harness's output) reaches the pod informer.
    if (pod?.metadata?.name && !this.container(pod)?.state?.terminated) {
      pod = await this.cluster
        .apis()
        .core.readNamespacedPod({ name: pod.metadata.name, namespace })
        .catch(() => pod);
    }
    const terminated = this.container(pod)?.state?.terminated;
    if (terminated?.message) writeFileSync(this.launch.outputFile, terminated.message);
    let logTail = '';
    if (pod?.metadata?.name && (terminated || this.container(pod)?.state?.running)) {
      try {
        const log = await this.cluster.apis().core.readNamespacedPodLog({
          name: pod.metadata.name,
          namespace,
          tailLines: LOG_TAIL_LINES,
          ...(settings.container && { container: settings.container }),
        });
        writeFileSync(path.join(this.launch.dir, `harness-${this.launch.issued.attempt}.log`), log);
        logTail = log.slice(-2000);
      } catch (err) {
        logTail = `(the pod's log could not be read: ${messageOf(err)})`;
      }
    }
    if (removeJob) await deleteJob(this.cluster, this.jobName).catch(() => undefined);
    return { logTail, finishedAt: terminated?.finishedAt ? new Date(terminated.finishedAt).getTime() : undefined };
  }
}

/** How a finished Job's run ended; undefined while it runs. */
function outcomeOf(
  job: V1Job,
  pod: V1Pod | undefined,
  container: V1ContainerStatus | undefined,
): Partial<HarnessRun> | undefined {
  const condition = (type: string) => job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
  if (condition('Complete')) return { exitCode: 0 };
  const failed = condition('Failed');
  if (!failed) return undefined;
  if (failed.reason === 'DeadlineExceeded') return { timedOut: true, killedBy: 'SIGTERM' };
  const terminated = container?.state?.terminated;
  if (pod?.status?.reason === 'Evicted' || !terminated) {
    const why = pod?.status?.reason
      ? `${pod.status.reason}: ${pod.status.message ?? ''}`
      : `${failed.reason}: ${failed.message ?? ''}`;
    return { problem: { failureClass: 'infrastructure', reason: `the harness pod was lost (${why.trim()})` } };
  }
  return {
    exitCode: terminated.exitCode,
    killedBy: terminated.signal
      ? `signal ${terminated.signal}`
      : terminated.reason === 'OOMKilled'
        ? 'OOMKilled'
        : null,
  };
}
