import { describe, expect, it } from 'vitest';
import { jobNameFor, kubernetesHarnessSchema, renderJob, rolloutLabel, templateProblems } from './job-template.js';

const settings = kubernetesHarnessSchema.parse({
  template: 'job.yaml',
  image: 'registry.example/agent@sha256:abc',
  namespace: 'agents',
});
const template = `
apiVersion: batch/v1
kind: Job
metadata:
  labels: { team: support }
spec:
  activeDeadlineSeconds: 3600
  template:
    spec:
      serviceAccountName: agent
      containers:
        - name: agent
          image: "{{image}}"
          args: ["--task-id", "{{taskId}}", "--run", "{{rolloutId}}/{{attempt}}"]
          env:
            - { name: OPENAI_API_KEY, value: "from-template" }
            - { name: LOG_LEVEL, value: debug }
        - name: sidecar
          image: busybox
`;
const identity = {
  rolloutId: 'Batch.Task: 7.0',
  attempt: 2,
  taskId: 'task "7": {{jobName}}',
  env: { OPENAI_API_KEY: 'rk-secret', REIN_TASK: '{"q":1}' },
};

describe('the Job of a rollout attempt', () => {
  it("keeps the user's template and adds the rollout's identity, credentials and Rein's settings", () => {
    const job = renderJob(template, settings, identity);
    const name = jobNameFor(identity.rolloutId, 2);
    expect(name).toMatch(/^rein-[0-9a-f]{16}-2$/);
    expect(job.metadata).toMatchObject({
      name,
      namespace: 'agents',
      labels: {
        team: 'support',
        'app.kubernetes.io/managed-by': 'rein',
        'rein.dev/rollout': rolloutLabel(identity.rolloutId),
        'rein.dev/attempt': '2',
      },
      annotations: { 'rein.dev/rollout-id': identity.rolloutId },
    });
    expect(job.spec).toMatchObject({ backoffLimit: 0, ttlSecondsAfterFinished: 3600, activeDeadlineSeconds: 3600 });
    expect(job.spec?.template.metadata?.labels).toMatchObject({ 'rein.dev/rollout': rolloutLabel(identity.rolloutId) });
    expect(job.spec?.template.spec).toMatchObject({ restartPolicy: 'Never', serviceAccountName: 'agent' });
    const [agent, sidecar] = job.spec?.template.spec?.containers ?? [];
    // A placeholder's value is text, never more template: {{jobName}} inside the task id stays as written.
    expect(agent?.args).toEqual(['--task-id', 'task "7": {{jobName}}', '--run', 'Batch.Task: 7.0/2']);
    expect(agent).toMatchObject({
      image: settings.image,
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'FallbackToLogsOnError',
    });
    // Rein's variables win over the template's; the rest of the template's stay.
    expect(agent?.env).toEqual([
      { name: 'LOG_LEVEL', value: 'debug' },
      { name: 'OPENAI_API_KEY', value: 'rk-secret' },
      { name: 'REIN_TASK', value: '{"q":1}' },
      { name: 'REIN_OUTPUT_FILE', value: '/dev/termination-log' },
    ]);
    expect(sidecar).toEqual({ name: 'sidecar', image: 'busybox' });
    const named = renderJob(template, { ...settings, container: 'sidecar' }, identity).spec?.template.spec
      ?.containers[1];
    expect(named?.env?.map((e) => e.name)).toContain('OPENAI_API_KEY');
  });

  it('is refused before anything launches when the template cannot make a valid one-pod Job', () => {
    expect(templateProblems(template, settings)).toEqual([]);
    const problems = (text: string, extra = {}) => templateProblems(text, { ...settings, ...extra }).join('\n');
    expect(problems('kind: Job\n  bad: [')).toMatch(/not valid YAML/);
    expect(problems('apiVersion: v1\nkind: Pod\nspec: {}')).toMatch(
      /must be apiVersion batch\/v1, kind Job \(got v1, Pod\).*has no spec.template.spec.containers/s,
    );
    expect(problems(template.replace('{{image}}', '{{imageDigest}}'))).toMatch(
      /uses \{\{imageDigest\}\}, which Rein does not know; the placeholders are \{\{rolloutId\}\}/,
    );
    expect(problems(template.replace('serviceAccountName: agent', 'restartPolicy: OnFailure'))).toMatch(
      /sets restartPolicy OnFailure; remove it/,
    );
    expect(problems(template.replace('activeDeadlineSeconds: 3600', 'backoffLimit: 3'))).toMatch(
      /sets backoffLimit 3; remove it \(Rein retries as new attempts/,
    );
    expect(problems(template.replace('activeDeadlineSeconds: 3600', 'parallelism: 4'))).toMatch(/must run one pod/);
    expect(problems(template, { container: 'harness' })).toMatch(
      /has no container named "harness" \(it has agent, sidecar\)/,
    );
  });
});
