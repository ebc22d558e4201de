import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { environmentName } from '../config/setting-types.js';
import { kubernetesHarnessSchema } from './kubernetes/job-template.js';
import type { ProgramSpec } from './program.js';

/**
 * The harness and verifier as configured: what the runner starts, and the harness version that
 * every rollout records (the harness ledger's key).
 */
export const programSchema = z.strictObject({
  command: z.string().min(1).describe('The program; a bare name is looked up on PATH'),
  args: z.array(z.string()).default([]).describe('Arguments; {task}, {output} and {rollout} are replaced per rollout'),
  cwd: z.string().optional().describe('Working directory (relative to the config file)'),
  env: z.record(environmentName, z.string()).default({}).describe('Fixed environment variables'),
  envAllow: z
    .array(environmentName)
    .default(['PATH', 'HOME', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'])
    .describe("Variables copied from the runner's environment; nothing else is inherited"),
  timeoutSeconds: z.number().positive().max(86_400).default(600).describe('Per run, counted from the moment it starts'),
  taskOnStdin: z
    .boolean()
    .default(false)
    .describe('Also give the program the task as JSON on standard input (the harness its view of it)'),
});

export const harnessSchema = z
  .strictObject({
    version: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('The version you give the harness (a release tag, a commit); part of the harness version'),
    local: programSchema.optional().describe('Run the harness as a local process per rollout'),
    kubernetes: kubernetesHarnessSchema.optional().describe('Run the harness as a Kubernetes Job per rollout attempt'),
    maxRunning: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .optional()
      .describe(
        'Runs of this harness (this harness version) going at once at most across all workers, whatever each ' +
          "worker's rollouts.concurrency: each run holds a lease in the store (through the gateway), renewed every " +
          "20 s while it runs and released after its verifier; a dead worker's leases come back 60 s after their last " +
          'renewal. Not part of the harness version. No limit when unset',
      ),
  })
  .refine((h) => (h.local === undefined) !== (h.kubernetes === undefined), {
    message: 'give exactly one of local and kubernetes',
  });

export const verifierSchema = programSchema.extend({
  version: z.string().min(1).max(200).optional().describe('The verifier version, recorded in the environment ledger'),
});

export type HarnessSettings = z.output<typeof harnessSchema>;
export type VerifierSettings = z.output<typeof verifierSchema>;

export function programSpec(settings: z.output<typeof programSchema>): ProgramSpec {
  return {
    command: settings.command,
    args: settings.args,
    ...(settings.cwd !== undefined && { cwd: settings.cwd }),
    env: settings.env,
    envAllow: settings.envAllow,
    timeoutMs: settings.timeoutSeconds * 1000,
    taskOnStdin: settings.taskOnStdin,
  };
}

/**
 * A content hash of what defines the harness: its spec, its Job template's text and its declared
 * version (and image, digest included). Same harness, same version.
 */
export function harnessVersion(settings: HarnessSettings): string {
  // How many may run at once is how it is scheduled, not what it is.
  const { maxRunning: _scheduling, ...defining } = settings;
  const template = defining.kubernetes ? readFileSync(defining.kubernetes.template, 'utf8') : undefined;
  return `h-${createHash('sha256')
    .update(canonicalJson({ ...defining, ...(template !== undefined && { templateText: template }) }))
    .digest('hex')
    .slice(0, 16)}`;
}

/** JSON with object keys sorted, so equal specs hash equally however they were written. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}
