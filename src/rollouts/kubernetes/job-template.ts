import { createHash } from 'node:crypto';
import type { V1Container, V1Job, V1PodSpec } from '@kubernetes/client-node';
import { z } from 'zod';
import { clusterSettingsShape, dnsLabel } from '../../kubernetes/settings.js';
import {
  jobTemplateProblems,
  MANAGED_BY_LABEL,
  overlayJob,
  programContainer,
  withReinEnvironment,
  type TemplateRules,
} from '../../kubernetes/job-overlay.js';
import { fillPlaceholders, JobTemplateError, parseTemplate } from '../../kubernetes/template.js';

/**
 * A rollout's Kubernetes Job, made from the user's template: the template says what runs (image,
 * command, resources, volumes, service account); Rein adds the rollout's identity (name, labels,
 * credentials as environment variables) and the settings it depends on (kubernetes/job-overlay.ts).
 */
export const kubernetesHarnessSchema = z.strictObject({
  template: z
    .string()
    .min(1)
    .describe('A Job manifest (YAML) with {{placeholders}}; a path relative to the config file'),
  image: z
    .string()
    .min(1)
    .describe(
      'The harness image, for {{image}} and containers without one; pin a digest (name@sha256:...) so the harness version is exact',
    ),
  namespace: dnsLabel.default('default').describe('Where the Jobs are created'),
  container: z.string().min(1).optional().describe('The container that runs the harness (the first one when unset)'),
  timeoutSeconds: z
    .number()
    .positive()
    .max(86_400)
    .default(600)
    .describe('Per run, counted from the moment the container starts running (not while pending)'),
  pendingTimeoutSeconds: z
    .number()
    .positive()
    .max(86_400)
    .default(600)
    .describe('Longest wait for the pod to be scheduled and start; then it counts as an infrastructure failure'),
  ttlSecondsAfterFinished: z
    .number()
    .int()
    .min(0)
    .default(3600)
    .describe('Kubernetes deletes a finished Job (and its pods) this long after it ends'),
  ...clusterSettingsShape,
});
export type KubernetesHarnessSettings = z.output<typeof kubernetesHarnessSchema>;

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

/** How the shared checks explain themselves for a rollout's Job. */
const ROLLOUT_RULES: TemplateRules = {
  program: 'harness',
  retries: 'Rein retries as new attempts, each with its own key and journal',
  onePod: ': one Job is one rollout attempt',
};

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
  const problems = jobTemplateProblems(job, settings.container, ROLLOUT_RULES);
  if (problems.length > 0) throw new JobTemplateError(`the Job template ${problems.join('; ')}`);

  const podSpec = job.spec?.template.spec as V1PodSpec;
  const container = programContainer(podSpec.containers, settings.container) as V1Container;
  const harness = withReinEnvironment(container, {
    image: settings.image,
    env: identity.env,
    resultFileEnv: 'REIN_OUTPUT_FILE',
  });
  return overlayJob(
    job,
    {
      name: jobName,
      namespace: settings.namespace,
      labels: {
        [MANAGED_BY_LABEL]: 'rein',
        [ROLLOUT_LABEL]: rolloutLabel(identity.rolloutId),
        [ATTEMPT_LABEL]: String(identity.attempt),
      },
      annotations: { [ROLLOUT_ANNOTATION]: identity.rolloutId },
      annotatePod: true,
      ttlSecondsAfterFinished: settings.ttlSecondsAfterFinished,
    },
    { ...podSpec, containers: podSpec.containers.map((c) => (c === container ? harness : c)) },
  );
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
