import { createHash } from 'node:crypto';
import type { RolloutSettings } from '../config/schema.js';
import { canonicalJson, programSpec, type VerifierSettings } from '../rollouts/harness-spec.js';
import type { LedgerKeys } from './ledger.js';

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
