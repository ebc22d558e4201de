import type { V1Container, V1EnvVar, V1Job, V1PodSpec } from '@kubernetes/client-node';

/**
 * What Rein lays over a user's Job template, the same for a rollout's Job and a training Job: the
 * template says what runs (image, command, resources, volumes, service account); Rein checks that
 * it runs one pod once, names the Job, labels it, turns off Kubernetes' own retries (Rein retries
 * as new Jobs it accounts for), sets a TTL after finishing, and gives the container that runs its
 * program Rein's variables and the termination message as the file for its result.
 */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';

/** How the checks explain themselves for one kind of Job. */
export interface TemplateRules {
  /** What the chosen container runs: 'harness', 'trainer'. */
  program: string;
  /** Why backoffLimit must go. */
  retries: string;
  /** Why one pod (completions and parallelism 1), after a separator. */
  onePod: string;
}

/** The container Rein runs its program in: the named one, else the first. */
export function programContainer(
  containers: readonly V1Container[],
  name: string | undefined,
): V1Container | undefined {
  return name === undefined ? containers[0] : containers.find((c) => c.name === name);
}

/** What is wrong with a filled-in template, each problem a phrase after "the Job template". Empty when it is usable. */
export function jobTemplateProblems(job: V1Job, containerName: string | undefined, rules: TemplateRules): string[] {
  if (job === null || typeof job !== 'object' || Array.isArray(job)) return ['is not a YAML mapping (a Job manifest)'];
  const problems: string[] = [];
  if (job.apiVersion !== 'batch/v1' || job.kind !== 'Job')
    problems.push(`must be apiVersion batch/v1, kind Job (got ${job.apiVersion}, ${job.kind})`);
  const podSpec = job.spec?.template?.spec;
  const containers = podSpec?.containers;
  if (!Array.isArray(containers) || containers.length === 0) {
    problems.push(`has no spec.template.spec.containers; give at least the ${rules.program} container`);
    return problems;
  }
  if (!programContainer(containers, containerName))
    problems.push(`has no container named "${containerName}" (it has ${containers.map((c) => c.name).join(', ')})`);
  const unnamed = containers.findIndex((c) => typeof c?.name !== 'string' || c.name === '');
  if (unnamed >= 0) problems.push(`spec.template.spec.containers[${unnamed}] has no name`);
  if (podSpec?.restartPolicy !== undefined && podSpec.restartPolicy !== 'Never') {
    problems.push(
      `sets restartPolicy ${podSpec.restartPolicy}; remove it (Rein runs each attempt once, restartPolicy Never)`,
    );
  }
  if (job.spec?.backoffLimit !== undefined && job.spec.backoffLimit !== 0)
    problems.push(`sets backoffLimit ${job.spec.backoffLimit}; remove it (${rules.retries})`);
  if ((job.spec?.completions ?? 1) !== 1 || (job.spec?.parallelism ?? 1) !== 1)
    problems.push(`must run one pod (completions and parallelism 1)${rules.onePod}`);
  return problems;
}

/**
 * The program's container with Rein's variables (replacing the template's of the same names) and
 * `resultFileEnv` naming its termination message file, where the program writes its result; a
 * crash leaves the log's end there instead.
 */
export function withReinEnvironment(
  container: V1Container,
  defaults: { image: string; env: Record<string, string>; resultFileEnv: string },
): V1Container {
  const resultFile = container.terminationMessagePath ?? '/dev/termination-log';
  const env: Record<string, string> = { ...defaults.env, [defaults.resultFileEnv]: resultFile };
  return {
    ...container,
    image: container.image ?? defaults.image,
    terminationMessagePath: resultFile,
    terminationMessagePolicy: container.terminationMessagePolicy ?? 'FallbackToLogsOnError',
    env: [
      ...(container.env ?? []).filter((e: V1EnvVar) => !(e.name in env)),
      ...Object.entries(env).map(([name, value]) => ({ name, value })),
    ],
  };
}

export interface JobIdentity {
  name: string;
  namespace: string;
  /** On the Job and its pod. */
  labels: Record<string, string>;
  /** On the Job; on its pod too when `annotatePod`. */
  annotations: Record<string, string>;
  annotatePod: boolean;
  /** Unless the template sets its own. */
  ttlSecondsAfterFinished: number;
}

/** The Job with Rein's identity and settings over the template's, running `podSpec` (restartPolicy Never). */
export function overlayJob(job: V1Job, identity: JobIdentity, podSpec: V1PodSpec): V1Job {
  const spec = job.spec as NonNullable<V1Job['spec']>;
  const podMetadata = spec.template.metadata;
  return {
    ...job,
    metadata: {
      ...job.metadata,
      name: identity.name,
      namespace: identity.namespace,
      labels: { ...job.metadata?.labels, ...identity.labels },
      annotations: { ...job.metadata?.annotations, ...identity.annotations },
    },
    spec: {
      ...spec,
      backoffLimit: 0,
      ttlSecondsAfterFinished: spec.ttlSecondsAfterFinished ?? identity.ttlSecondsAfterFinished,
      template: {
        ...spec.template,
        metadata: {
          ...podMetadata,
          labels: { ...podMetadata?.labels, ...identity.labels },
          ...(identity.annotatePod && { annotations: { ...podMetadata?.annotations, ...identity.annotations } }),
        },
        spec: { ...podSpec, restartPolicy: 'Never' },
      },
    },
  };
}
