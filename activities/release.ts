import { eventLoopTurns, whileHeartbeating } from './heartbeat.js';
import { decideGate, type GateRequest } from '../src/gate/decision.js';
import { GateInputError, type Verdict } from '../src/gate/gate.js';
import type { GatewayControlClient } from '../src/gateway/control-client.js';
import { decisionEnvironment } from '../src/ledger/environment.js';
import type { LedgerStore } from '../src/ledger/ledger.js';
import { recordFromRollouts, type LedgerEntryRequest } from '../src/ledger/record-entry.js';
import type { PolicyRegistry, StoredDecision } from '../src/registry/policy-registry.js';
import { PRODUCTION_ALIAS, productionOrBase, promote, PromotionError } from '../src/registry/promotion.js';
import type { RolloutSelection } from '../src/rollouts/rollout-id.js';
import type { TraceStore } from '../src/store/trace-store.js';
import { GateInputFailure, LedgerFailure, PromotionFailure } from '../workflows/failures.js';
import { runDepsFor, type RunDepsSource } from './run-deps.js';

export interface ReleaseActivityDeps {
  store: TraceStore;
  registry?: PolicyRegistry;
  ledger?: LedgerStore;
  gateway?: GatewayControlClient;
  /** The gate's rules and the harness a decision or ledger row records: the run's own config, by its configHash. */
  runs: RunDepsSource;
}

/** A replayed set of rollouts by reference: its batch id, tasks and samples per task. */
export type RolloutSetRef = RolloutSelection;

/** The replays to judge, and the run whose gate rules judge them. */
export type GateCandidateInput = Omit<GateRequest, 'environment'> & {
  configHash: string;
  runId?: string;
  /** The variants the candidate's own iteration trained in (its ledger row is written after the gate). */
  trainedIn?: string[];
};

/** Small enough for workflow history; the whole record (evidence, rollout links) is in the registry. */
export interface GateSummary {
  decisionId: string;
  verdict: Verdict;
  reasons: string[];
  /** Over the scored pairs; absent when none was scored on both sides. */
  acceptedRate?: { incumbent: number; candidate: number };
}

/** A row of the ledgers and the rollouts behind it, and the run whose harness and environment key it. */
export type LedgerInput = LedgerEntryRequest & { configHash: string };

export function createReleaseActivities(deps: ReleaseActivityDeps) {
  const registryOrFail = () => {
    if (!deps.registry) throw new PromotionFailure('this worker has no policy registry');
    return deps.registry;
  };
  return {
    /**
     * The version `production` points at, after checking the candidate is registered (a
     * promotion needs its lineage). A registry that never had a production starts from the
     * configured base.
     */
    async productionPolicy(input: {
      base: { version: string; checkpointUri: string };
      candidate: string;
      actor: string;
    }): Promise<string> {
      return whileHeartbeating(() => refusedForGood(() => productionOrBase(registryOrFail(), deps.gateway, input)));
    },

    /** Pairs the two replays, applies the gate's rules and keeps the decision with its evidence. */
    async gateCandidate(input: GateCandidateInput): Promise<GateSummary> {
      return whileHeartbeating(async () => {
        const registry = registryOrFail();
        const { gate, harness } = await runDepsFor(deps.runs, input.configHash);
        const sources = { store: deps.store, registry, gate, ...(harness && { harness }), ...gatewayLink(deps) };
        // A run's decision links the environment ledger: the variants it checked and those its training used.
        const environment =
          input.runId && deps.ledger
            ? decisionEnvironment(await deps.ledger.list({ runId: input.runId }), input.trainedIn)
            : undefined;
        try {
          return gateSummary(
            await decideGate(sources, { ...input, ...(environment && { environment }) }, eventLoopTurns()),
          );
        } catch (err) {
          if (err instanceof GateInputError) throw new GateInputFailure(err.message);
          throw err;
        }
      });
    },

    /** Moves production to a candidate the gate passed; refused promotions fail for good. */
    async promotePolicy(input: {
      version: string;
      decisionId: string;
      actor: string;
    }): Promise<{ from: string | null; to: string; gatewayUpdated: boolean }> {
      return whileHeartbeating(() => refusedForGood(() => promoteOnce(registryOrFail(), deps.gateway, input)));
    },

    /** One row in the three ledgers, from the rollouts behind it. */
    async recordLedgerEntry(input: LedgerInput): Promise<void> {
      return whileHeartbeating(async () => {
        const { ledger } = deps;
        if (!ledger) throw new LedgerFailure('this worker has no ledger');
        const { harness, verifier, environment, rollouts, gate } = await runDepsFor(deps.runs, input.configHash);
        if (!harness || !verifier)
          throw new LedgerFailure(`run config ${input.configHash} has no harness or verifier to key a ledger row with`);
        const sources = { ledger, harness, verifier, store: deps.store, rollouts, ...(environment && { environment }) };
        await recordFromRollouts({ ...sources, acceptReward: gate.acceptReward }, input, eventLoopTurns());
      });
    },
  };
}

/** The gateway a decision links its rollouts' calls from, when this worker has one. */
function gatewayLink(deps: ReleaseActivityDeps): { gateway?: { url: string } } {
  return deps.gateway ? { gateway: deps.gateway } : {};
}

/** A promotion the registry refuses fails for good (PromotionFailure): a retry would be refused again. */
async function refusedForGood<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof PromotionError) throw new PromotionFailure(err.message);
    throw err;
  }
}

/**
 * promote(), unless production already serves the version: then this is a retry after the move,
 * and the promotion happened.
 */
async function promoteOnce(
  registry: PolicyRegistry,
  gateway: GatewayControlClient | undefined,
  input: { version: string; decisionId: string; actor: string },
): Promise<{ from: string | null; to: string; gatewayUpdated: boolean }> {
  if ((await registry.alias(PRODUCTION_ALIAS)) === input.version) {
    const last = (await registry.aliasHistory(PRODUCTION_ALIAS)).at(-1)!;
    return { from: last.from, to: last.to, gatewayUpdated: true };
  }
  const moved = await promote(registry, gateway, input);
  return { from: moved.change.from, to: moved.change.to, gatewayUpdated: moved.gatewayUpdated };
}

/** A kept decision as workflow history carries it. */
function gateSummary(stored: StoredDecision): GateSummary {
  const { acceptedRate } = stored.record.evidence as Pick<GateSummary, 'acceptedRate'>;
  return {
    decisionId: stored.id,
    verdict: stored.verdict,
    reasons: stored.record.reasons as string[],
    ...(acceptedRate && { acceptedRate }),
  };
}
