import { createHash } from 'node:crypto';
import type { RolloutSettings } from '../config/schema.js';
import { canonicalJson, programSpec, type VerifierSettings } from '../rollouts/harness-spec.js';
import type { DecisionEnvironment } from '../gate/decision.js';
import type { LedgerEntry, LedgerKeys } from './ledger.js';

const digest = (value: unknown) => createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 16);

/**
 * The environment a result was measured in: the task set (by content hash), the verifier (its
 * declared version and what runs it) and the settings that shape what the harness sees and how
 * it is scored. Two entries with equal keys ran in the same environment.
 */
export function environmentKeys(
  taskSetSha256: string,
  verifier: VerifierSettings,
  rollouts: RolloutSettings,
  harnessEnv: Record<string, string> = {},
  environmentModule?: string,
  variants?: readonly string[],
): LedgerKeys['environment'] {
  const { version, ...program } = verifier;
  return {
    taskSet: taskSetSha256.slice(0, 16),
    verifier: `${version ?? 'unversioned'}@${digest(programSpec(program))}`,
    config: digest({
      hiddenFields: rollouts.hiddenFields,
      rewardWeights: rollouts.rewardWeights,
      refusalPatterns: rollouts.refusalPatterns ?? null,
      maxAttempts: rollouts.maxAttempts,
      harnessEnv,
    }),
    ...(environmentModule !== undefined && { module: environmentModule }),
    ...(variants && variants.length > 0 && { variants: [...variants].sort() }),
  };
}

/**
 * What a run's gate decision records of its environment, from the run's ledger rows: every
 * variant checked so far (its `variant` row, kept or not) and the variants its iterations'
 * training ran in (with `alsoTrainedIn`: the candidate's own iteration, whose row comes after
 * the gate); undefined when the run has no environment module.
 */
export function decisionEnvironment(
  rows: readonly LedgerEntry[],
  alsoTrainedIn: readonly string[] = [],
): DecisionEnvironment | undefined {
  const module = rows.find((r) => r.environment.module !== undefined)?.environment.module;
  if (module === undefined) return undefined;
  const trainedIn = new Set([
    ...rows.filter((r) => r.kind === 'iteration').flatMap((r) => r.environment.variants ?? []),
    ...alsoTrainedIn,
  ]);
  return {
    module,
    trainedIn: [...trainedIn].sort(),
    variants: rows.flatMap((r) =>
      r.kind === 'variant' && r.variant
        ? [{ id: r.variant.id, name: r.variant.name, origin: r.variant.origin, kept: r.variant.kept, ledgerId: r.id }]
        : [],
    ),
  };
}
