import { createHash } from 'node:crypto';
import type { V1Container, V1EnvVar, V1Job } from '@kubernetes/client-node';
import { z } from 'zod';
import { clusterSettingsShape, dnsLabel } from '../../kubernetes/settings.js';
import { fillPlaceholders, JobTemplateError, parseTemplate } from '../../kubernetes/template.js';

/**
 * A rollout's Kubernetes Job, made from the user's template: the template says what runs (image,
 * command, resources, volumes, service account); Rein adds the rollout's identity (name, labels,
 * credentials as environment variables) and the settings it depends on (no Job-level retries,
 * restartPolicy Never, a TTL after finishing).
 */
export const kubernetesHarnessSchema = z.strictObject({
  template: z.string().min(1).describe('A Job manifest (YAML) with {{placeholders}}; a path relative to the config file'),
  image: z.string().min(1).describe('The harness image, for {{image}} and containers without one; pin a digest (name@sha256:...) so the harness version is exact'),
  namespace: dnsLabel.default('default').describe('Where the Jobs are created'),
  container: z.string().min(1).optional().describe('The container that runs the harness (the first one when unset)'),
  timeoutSeconds: z.number().positive().max(86_400).default(600).describe('Per run, counted from the moment the container starts running (not while pending)'),
  pendingTimeoutSeconds: z.number().positive().max(86_400).default(600).describe('Longest wait for the pod to be scheduled and start; then it counts as an infrastructure failure'),
  ttlSecondsAfterFinished: z.number().int().min(0).default(3600).describe('Kubernetes deletes a finished Job (and its pods) this long after it ends'),
  ...clusterSettingsShape,
});
export type KubernetesHarnessSettings = z.output<typeof kubernetesHarnessSchema>;

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const ROLLOUT_LABEL = 'rein.dev/rollout';
export const ATTEMPT_LABEL = 'rein.dev/attempt';
export const ROLLOUT_ANNOTATION = 'rein.dev/rollout-id';

type Placeholder = 'rolloutId' | 'attempt' | 'jobName' | 'namespace' | 'image' | 'taskId';


/** Label values are short and plain; a rollout id may be neither, so the label holds a digest of it. */
export function rolloutLabel(rolloutId: string): string {
  return createHash('sha256').update(rolloutId).digest('hex').slice(0, 16);
}

/** One Job per rollout attempt, with a name a new runner can find again. */
export function jobNameFor(rolloutId: string, attempt: number): string {
  return `rein-${rolloutLabel(rolloutId)}-${attempt}`;
}

export interface JobIdentity {
  rolloutId: string;
  attempt: number;
  taskId: string;
  /** Variables for the harness container: credentials, the task, where its output goes. */
  env: Record<string, string>;
}

/**
 * Renders the template for one rollout attempt. Placeholders are replaced inside the parsed
 * YAML's strings, never in its text, so a value cannot change the manifest's structure.
 */
export function renderJob(templateText: string, settings: KubernetesHarnessSettings, identity: JobIdentity): V1Job {
  const manifest = parseTemplate(templateText);
  const jobName = jobNameFor(identity.rolloutId, identity.attempt);
  const values: Record<Placeholder, string> = {
    rolloutId: identity.rolloutId,
    attempt: String(identity.attempt),
    jobName,
    namespace: settings.namespace,
    image: settings.image,
    taskId: identity.taskId,
  };
  const job = fillPlaceholders(manifest, values) as V1Job;
  const problems = jobProblems(job, settings);
  if (problems.length > 0) throw new JobTemplateError(`the Job template ${problems.join('; ')}`);

  const labels = { [MANAGED_BY_LABEL]: 'rein', [ROLLOUT_LABEL]: rolloutLabel(identity.rolloutId), [ATTEMPT_LABEL]: String(identity.attempt) };
  const annotations = { [ROLLOUT_ANNOTATION]: identity.rolloutId };
  const spec = job.spec as NonNullable<V1Job['spec']>;
  const podSpec = spec.template.spec as NonNullable<NonNullable<V1Job['spec']>['template']['spec']>;
  const container = harnessContainer(podSpec.containers, settings) as V1Container;
  const outputPath = container.terminationMessagePath ?? '/dev/termination-log';
  const reinEnv: Record<string, string> = { ...identity.env, REIN_OUTPUT_FILE: outputPath };
  Object.assign(container, {
    image: container.image ?? settings.image,
    terminationMessagePath: outputPath,
    // The harness writes its output to the termination message; a crash leaves the log's end there instead.
    terminationMessagePolicy: container.terminationMessagePolicy ?? 'FallbackToLogsOnError',
    env: [...(container.env ?? []).filter((e: V1EnvVar) => !(e.name in reinEnv)), ...Object.entries(reinEnv).map(([name, value]) => ({ name, value }))],
  });
  return {
    ...job,
    metadata: { ...job.metadata, name: jobName, namespace: settings.namespace, labels: { ...job.metadata?.labels, ...labels }, annotations: { ...job.metadata?.annotations, ...annotations } },
    spec: {
      ...spec,
      // Rein retries as attempts of its own, each with its own key and journal; Kubernetes must not.
      backoffLimit: 0,
      ttlSecondsAfterFinished: spec.ttlSecondsAfterFinished ?? settings.ttlSecondsAfterFinished,
      template: {
        ...spec.template,
        metadata: { ...spec.template.metadata, labels: { ...spec.template.metadata?.labels, ...labels }, annotations: { ...spec.template.metadata?.annotations, ...annotations } },
        spec: { ...podSpec, restartPolicy: 'Never' },
      },
    },
  };
}

/** What is wrong with a template before any rollout uses it: rendered for a made-up rollout and checked. */
export function templateProblems(templateText: string, settings: KubernetesHarnessSettings): string[] {
  try {
    renderJob(templateText, settings, { rolloutId: 'check', attempt: 1, taskId: 'check', env: {} });
    return [];
  } catch (err) {
    if (err instanceof JobTemplateError) return [`harness.kubernetes.template: ${err.message}`];
    throw err;
  }
}

function jobProblems(job: V1Job, settings: KubernetesHarnessSettings): string[] {
  if (job === null || typeof job !== 'object' || Array.isArray(job)) return ['is not a YAML mapping (a Job manifest)'];
  const problems: string[] = [];
  if (job.apiVersion !== 'batch/v1' || job.kind !== 'Job') problems.push(`must be apiVersion batch/v1, kind Job (got ${job.apiVersion}, ${job.kind})`);
  const podSpec = job.spec?.template?.spec;
  const containers = podSpec?.containers;
  if (!Array.isArray(containers) || containers.length === 0) {
    problems.push('has no spec.template.spec.containers; give at least the harness container');
    return problems;
  }
  if (!harnessContainer(containers, settings)) problems.push(`has no container named "${settings.container}" (it has ${containers.map((c) => c.name).join(', ')})`);
  const unnamed = containers.findIndex((c) => typeof c?.name !== 'string' || c.name === '');
  if (unnamed >= 0) problems.push(`spec.template.spec.containers[${unnamed}] has no name`);
  if (podSpec?.restartPolicy !== undefined && podSpec.restartPolicy !== 'Never') {
    problems.push(`sets restartPolicy ${podSpec.restartPolicy}; remove it (Rein runs each attempt once, restartPolicy Never)`);
  }
  if (job.spec?.backoffLimit !== undefined && job.spec.backoffLimit !== 0) {
    problems.push(`sets backoffLimit ${job.spec.backoffLimit}; remove it (Rein retries as new attempts, each with its own key and journal)`);
  }
  if ((job.spec?.completions ?? 1) !== 1 || (job.spec?.parallelism ?? 1) !== 1) problems.push('must run one pod (completions and parallelism 1): one Job is one rollout attempt');
  return problems;
}

function harnessContainer(containers: V1Container[], settings: KubernetesHarnessSettings): V1Container | undefined {
  return settings.container === undefined ? containers[0] : containers.find((c) => c.name === settings.container);
}
