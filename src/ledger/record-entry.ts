import type { RolloutSettings } from '../config/schema.js';
import { loadEnvironment } from '../environments/load.js';
import type { EnvironmentSettings } from '../environments/settings.js';
import { readRolloutFacts, type RolloutFacts } from '../gate/rollout-facts.js';
import { harnessVersion, type HarnessSettings, type VerifierSettings } from '../rollouts/harness-spec.js';
import { selectionRolloutIds, type RolloutSelection } from '../rollouts/rollout-id.js';
import type { TraceStore } from '../store/trace-store.js';
import { environmentKeys } from './environment.js';
import { ledgerMetrics, type LedgerEntry, type LedgerStore, type VariantLedgerFacts } from './ledger.js';

/** A ledger row to record: what it is about, and the rollouts its metrics come from, by reference. */
export interface LedgerEntryRequest {
  id: string;
  kind: LedgerEntry['kind'];
  runId: string | null;
  iteration: number | null;
  policyVersion: string;
  parent: string | null;
  taskSet: { sha256: string };
  harnessEnv?: Record<string, string>;
  /** The ids of the environment variants some of its rollouts ran in (variantId). */
  environmentVariants?: string[];
  sets: RolloutSelection[];
  elapsedSeconds: number;
  decisionId: string | null;
  /** A `variant` row's subject. */
  variant?: VariantLedgerFacts;
}

/** The ledgers, the rollouts' store, and the settings that key a row's harness and environment. */
export interface LedgerSources {
  ledger: LedgerStore;
  store: TraceStore;
  harness: HarnessSettings;
  verifier: VerifierSettings;
  rollouts: RolloutSettings;
  /** The run's environment, when it has one: its id keys the environment ledger too. */
  environment?: EnvironmentSettings;
  /** A rollout counts as accepted when its reward is at least this (the gate's acceptReward). */
  acceptReward: number;
}

/**
 * Records one row in the three ledgers (model, harness, environment), its metrics read from the
 * rollouts behind it; a row already there under the id (a retry's) stays as it is. `beforeEach`
 * is awaited before each rollout is read (see readRolloutFacts).
 */
export async function recordFromRollouts(
  sources: LedgerSources,
  request: LedgerEntryRequest,
  beforeEach?: () => Promise<void>,
): Promise<void> {
  const { ledger } = sources;
  if (await ledger.get(request.id)) return;
  const facts: RolloutFacts[] = [];
  for (const set of request.sets)
    facts.push(...(await readRolloutFacts(sources.store, selectionRolloutIds(set), beforeEach)));
  await ledger.record({
    id: request.id,
    kind: request.kind,
    runId: request.runId,
    iteration: request.iteration,
    decisionId: request.decisionId,
    batchIds: request.sets.map((s) => s.batchId),
    model: { policyVersion: request.policyVersion, parent: request.parent },
    harness: { version: harnessVersion(sources.harness) },
    environment: environmentKeys(
      request.taskSet.sha256,
      sources.verifier,
      sources.rollouts,
      request.harnessEnv,
      sources.environment && (await loadEnvironment(sources.environment.module)).id,
      request.environmentVariants,
    ),
    metrics: ledgerMetrics(facts, sources.acceptReward, request.elapsedSeconds),
    ...(request.variant && { variant: request.variant }),
  });
}
