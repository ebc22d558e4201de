import { z } from 'zod';
import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.js';
import { environmentSchema, type EnvironmentSettings } from '../environments/settings.js';
import { gateRulesSchema, type GateRules } from '../gate/config.js';
import { rolloutSettings } from '../rollouts/config.js';
import {
  harnessSchema,
  verifierSchema,
  type HarnessSettings,
  type VerifierSettings,
} from '../rollouts/harness-spec.js';
import { sampleSettings } from '../samples/config.js';
import { resultShapingText, textHash } from './config-hash.js';
import type { ReinConfig, RolloutSettings, SampleSettings } from './schema.js';

/**
 * A run's own config, stored content-addressed in the artifact store when the run (or a release,
 * a shadow run, a schedule) starts: `configs/<configHash>.json`, whose bytes are exactly the text
 * configHash hashes. Workflows carry only the hash; a worker loads the run's config by it, so every
 * run uses its own harness, verifier, sample and gate settings whatever config the worker started
 * with.
 */

/** The rollout settings that shape results; how fast rollouts are launched stays the worker's own. */
export type RolloutRules = Pick<RolloutSettings, 'hiddenFields' | 'rewardWeights' | 'refusalPatterns' | 'maxAttempts'>;

/** What a run's activities take from its config. */
export interface RunConfig {
  configHash: string;
  harness?: HarnessSettings;
  verifier?: VerifierSettings;
  environment?: EnvironmentSettings;
  rolloutRules: RolloutRules;
  samples: SampleSettings;
  gate: GateRules;
}

const { hiddenFields, rewardWeights, refusalPatterns, maxAttempts } = rolloutSettings.shape;

/** The stored text as this version reads it (resultShapingConfig; the parts activities do not use are ignored). */
const storedRunConfig = z.object({
  harness: harnessSchema.nullable(),
  verifier: verifierSchema.nullable(),
  environment: environmentSchema.optional(),
  rollouts: z.object({
    hiddenFields,
    rewardWeights,
    refusalPatterns: refusalPatterns.unwrap().nullable(),
    maxAttempts,
  }),
  samples: sampleSettings,
  // The gate's rules; concurrentRuns (what starting a run does) is in the text but no activity's business.
  gate: z.object(gateRulesSchema.shape),
});

const CONFIG_HASH = /^[0-9a-f]{16}$/;

/** The artifact name a run's config is stored under. */
export const runConfigName = (hash: string): string => `configs/${hash}.json`;

/** A run's config that cannot be used: not stored, changed after it was stored, or from another version. */
export class RunConfigError extends Error {
  override name = 'RunConfigError';
}

export class RunConfigNotStoredError extends RunConfigError {
  override name = 'RunConfigNotStoredError';
  constructor(
    readonly configHash: string,
    storeUrl: string,
  ) {
    super(
      `run's config ${configHash} is not in the artifact store at ${storeUrl}; start the run with a client of this version ` +
        `(it stores ${runConfigName(configHash)} when a run starts), and give the client and every worker the same artifacts.url`,
    );
  }
}

/** Stores the config's run-shaping part under its hash; the same hash again writes nothing. */
export async function storeRunConfig(
  store: ArtifactStore,
  config: ReinConfig,
): Promise<{ configHash: string; uri: string }> {
  const text = resultShapingText(config);
  const hash = textHash(text);
  const name = runConfigName(hash);
  const uri = store.uriOf(name);
  if (!(await store.exists(uri))) await store.put(name, text);
  return { configHash: hash, uri };
}

/** A run's config by its hash, checked against the hash; RunConfigError says what is wrong and what to do. */
export async function loadRunConfig(store: ArtifactStore, hash: string): Promise<RunConfig> {
  const { text, uri } = await readRunConfigText(store, hash);
  return parseRunConfig(hash, text, uri);
}

/** The stored text of a run's config (canonical JSON), checked against its hash. */
export async function readRunConfigText(store: ArtifactStore, hash: string): Promise<{ text: string; uri: string }> {
  if (!CONFIG_HASH.test(hash)) {
    throw new RunConfigError(
      `"${hash}" is not a run's config hash (16 hex digits); start the run with \`rein train\`, the API or a client of this version`,
    );
  }
  const uri = store.uriOf(runConfigName(hash));
  let text: string;
  try {
    text = (await store.get(uri)).toString('utf8');
  } catch (err) {
    if (err instanceof ArtifactNotFoundError) throw new RunConfigNotStoredError(hash, store.url);
    throw err;
  }
  if (textHash(text) !== hash) {
    throw new RunConfigError(
      `the run config at ${uri} hashes to ${textHash(text)}, not ${hash}: it changed after it was stored; delete it and start the run again`,
    );
  }
  return { text, uri };
}

/** A config's own RunConfig, read the way a stored one is (so a worker's own config and a stored copy agree). */
export function runConfigOf(config: ReinConfig): RunConfig {
  const text = resultShapingText(config);
  return parseRunConfig(textHash(text), text, 'the worker config');
}

function parseRunConfig(hash: string, text: string, where: string): RunConfig {
  const parsed = storedRunConfig.safeParse(JSON.parse(text));
  if (!parsed.success) {
    throw new RunConfigError(
      `the run config ${hash} at ${where} does not fit this worker's version (${z.prettifyError(parsed.error)}); ` +
        'run workers of the same Rein version as the client that started the run',
    );
  }
  const { harness, verifier, environment, rollouts, samples, gate } = parsed.data;
  return {
    configHash: hash,
    ...(harness && { harness }),
    ...(verifier && { verifier }),
    ...(environment && { environment }),
    rolloutRules: {
      hiddenFields: rollouts.hiddenFields,
      rewardWeights: rollouts.rewardWeights,
      maxAttempts: rollouts.maxAttempts,
      ...(rollouts.refusalPatterns && { refusalPatterns: rollouts.refusalPatterns }),
    },
    samples,
    gate,
  };
}
