import { createHash } from 'node:crypto';
import { canonicalJson } from '../rollouts/harness-spec.js';
import type { ReinConfig } from './schema.js';

/**
 * The part of the config that shapes what a held-out replay, a batch or a gate decision
 * contains: how rollouts run and are scored, how samples are built, the gate's rules and the
 * base. It names replays, decisions and ledger rows, so everything else (ports, addresses, log
 * level, storage, Temporal, run sizes) stays out: changing those must not redo a replay.
 */
export function resultShapingConfig(config: ReinConfig): Record<string, unknown> {
  const { harness, verifier, environment, rollouts, samples, gate, run, gateway } = config;
  const { autoPromote: _autoPromote, ...gateRules } = gate;
  return {
    harness: harness ?? null,
    verifier: verifier ?? null,
    // Only when set: the hashes of configs without an environment stay what they were.
    ...(environment && { environment }),
    rollouts: {
      hiddenFields: rollouts.hiddenFields,
      rewardWeights: rollouts.rewardWeights,
      refusalPatterns: rollouts.refusalPatterns ?? null,
      maxAttempts: rollouts.maxAttempts,
    },
    samples,
    gate: gateRules,
    base: run.base,
    evalHarnessEnv: run.evalHarnessEnv,
    // What the journal records of each call: redaction, which model serves a version, token ids and log-probs.
    gateway: {
      redact: gateway.redact,
      policies: gateway.policies,
      backends: Object.fromEntries(
        Object.entries(gateway.backends).map(([name, b]) => [name, { tokenIds: b.tokenIds, logprobs: b.logprobs }]),
      ),
    },
  };
}

/**
 * resultShapingConfig as canonical JSON: the exact bytes a run's config is stored as
 * (src/config/run-config.ts), so its configHash is the hash of the stored object.
 */
export function resultShapingText(config: ReinConfig): string {
  return canonicalJson(resultShapingConfig(config));
}

/** The short content hash of a stored run config's text. */
export function textHash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}

/** A short content hash of resultShapingConfig, kept in every workflow's memo. */
export function configHash(config: ReinConfig): string {
  return textHash(resultShapingText(config));
}
