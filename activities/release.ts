import { eventLoopTurns, whileHeartbeating } from './heartbeat.js';
import type { GateSettings, RolloutSettings } from '../src/config/schema.js';
import { evaluateGate, GateInputError, pairOutcomes, type Verdict } from '../src/gate/gate.js';
import { readRolloutFacts, type RolloutFacts } from '../src/gate/rollout-facts.js';
import type { GatewayControlClient } from '../src/gateway/control-client.js';
import { environmentKeys } from '../src/ledger/environment.js';
import { ledgerMetrics, type LedgerEntry, type LedgerStore } from '../src/ledger/ledger.js';
import type { PolicyRegistry } from '../src/registry/policy-registry.js';
import { PRODUCTION_ALIAS, promote, PromotionError } from '../src/registry/promotion.js';
import { harnessVersion, type HarnessSettings, type VerifierSettings } from '../src/rollouts/harness-spec.js';
import { selectionRolloutIds } from '../src/rollouts/rollout-id.js';
import type { TraceStore } from '../src/store/trace-store.js';
import { GateInputFailure, LedgerFailure, PromotionFailure } from '../workflows/failures.js';

export interface ReleaseActivityDeps {
  store: TraceStore;
  registry?: PolicyRegistry;
  ledger?: LedgerStore;
  gateway?: GatewayControlClient;
  harness?: HarnessSettings;
  verifier?: VerifierSettings;
  rollouts: RolloutSettings;
  gate: GateSettings;
}

/** A replayed set of rollouts by reference: its batch id, tasks and samples per task. */
export interface RolloutSetRef {
  batchId: string;
  taskIds: string[];
  samplesPerTask: number;
}

export interface GateCandidateInput {
  decisionId: string;
  candidate: string;
  incumbent: string;
  candidateSet: RolloutSetRef;
  incumbentSet: RolloutSetRef;
}

/** Small enough for workflow history; the whole record (evidence, rollout links) is in the registry. */
export interface GateSummary {
  decisionId: string;
  verdict: Verdict;
  reasons: string[];
  /** Over the scored pairs; absent when none was scored on both sides. */
  acceptedRate?: { incumbent: number; candidate: number };
}

export interface LedgerInput {
  id: string;
  kind: LedgerEntry['kind'];
  runId: string | null;
  iteration: number | null;
  policyVersion: string;
  parent: string | null;
  taskSet: { sha256: string };
  harnessEnv?: Record<string, string>;
  sets: RolloutSetRef[];
  elapsedSeconds: number;
  decisionId: string | null;
}

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
      return whileHeartbeating(async () => {
        const registry = registryOrFail();
        if (!(await registry.get(input.candidate))) {
          throw new PromotionFailure(
            `policy ${input.candidate} is not registered; \`rein register ${input.candidate} --checkpoint URI\` records it (\`rein policies\` lists the versions)`,
          );
        }
        const current = await registry.alias(PRODUCTION_ALIAS);
        if (current) return current;
        if (!(await registry.get(input.base.version))) {
          await registry.register({
            ...input.base,
            parent: null,
            runId: null,
            iteration: null,
            batchContentHash: null,
            trainerMetrics: {},
          });
        }
        // Only if still unset: another release may have set it meanwhile (then this retried activity returns that).
        await registry.setAlias(
          PRODUCTION_ALIAS,
          input.base.version,
          { operation: 'set', actor: input.actor, reason: 'production was unset; it starts at the base policy' },
          { expectedFrom: null },
        );
        await deps.gateway?.setAlias(PRODUCTION_ALIAS, input.base.version).catch(() => undefined);
        return input.base.version;
      });
    },

    /** Pairs the two replays, applies the gate's rules and keeps the decision with its evidence. */
    async gateCandidate(input: GateCandidateInput): Promise<GateSummary> {
      return whileHeartbeating(async () => {
        const registry = registryOrFail();
        const existing = await registry.decision(input.decisionId);
        // An `insufficient` decision is made again: the replays may have been completed since.
        if (!existing || existing.verdict === 'insufficient') {
          const turn = eventLoopTurns();
          const candidate = await readRolloutFacts(deps.store, selectionRolloutIds(input.candidateSet), turn);
          const incumbent = await readRolloutFacts(deps.store, selectionRolloutIds(input.incumbentSet), turn);
          let decision;
          try {
            decision = evaluateGate(deps.gate, pairOutcomes(incumbent, candidate));
          } catch (err) {
            if (err instanceof GateInputError) throw new GateInputFailure(err.message);
            throw err;
          }
          const { autoPromote: _autoPromote, ...rules } = deps.gate;
          await registry.saveDecision({
            id: input.decisionId,
            candidate: input.candidate,
            incumbent: input.incumbent,
            verdict: decision.verdict,
            record: {
              ...decision,
              rules,
              candidate: { version: input.candidate, ...input.candidateSet },
              incumbent: { version: input.incumbent, ...input.incumbentSet },
              harnessVersion: deps.harness ? harnessVersion(deps.harness) : null,
              // Every rollout id resolves to its calls and events: GET /api/rollouts/{id}/calls on the gateway.
              traces: deps.gateway ? `${deps.gateway.url}/api/rollouts/{rolloutId}` : null,
            },
          });
        }
        const stored = (await registry.decision(input.decisionId))!;
        const { acceptedRate } = stored.record.evidence as Pick<GateSummary, 'acceptedRate'>;
        return {
          decisionId: stored.id,
          verdict: stored.verdict,
          reasons: stored.record.reasons as string[],
          ...(acceptedRate && { acceptedRate }),
        };
      });
    },

    /** Moves production to a candidate the gate passed; refused promotions fail for good. */
    async promotePolicy(input: {
      version: string;
      decisionId: string;
      actor: string;
    }): Promise<{ from: string | null; to: string; gatewayUpdated: boolean }> {
      return whileHeartbeating(async () => {
        const registry = registryOrFail();
        if ((await registry.alias(PRODUCTION_ALIAS)) === input.version) {
          // A retry after the move: the promotion happened.
          const last = (await registry.aliasHistory(PRODUCTION_ALIAS)).at(-1)!;
          return { from: last.from, to: last.to, gatewayUpdated: true };
        }
        try {
          const moved = await promote(registry, deps.gateway, input);
          return { from: moved.change.from, to: moved.change.to, gatewayUpdated: moved.gatewayUpdated };
        } catch (err) {
          if (err instanceof PromotionError) throw new PromotionFailure(err.message);
          throw err;
        }
      });
    },

    /** One row in the three ledgers, from the rollouts behind it. */
    async recordLedgerEntry(input: LedgerInput): Promise<void> {
      return whileHeartbeating(async () => {
        const { ledger, harness, verifier } = deps;
        if (!ledger || !harness || !verifier)
          throw new LedgerFailure('this worker has no ledger, harness or verifier configured');
        if (await ledger.get(input.id)) return;
        const turn = eventLoopTurns();
        const facts: RolloutFacts[] = [];
        for (const set of input.sets)
          facts.push(...(await readRolloutFacts(deps.store, selectionRolloutIds(set), turn)));
        await ledger.record({
          id: input.id,
          kind: input.kind,
          runId: input.runId,
          iteration: input.iteration,
          decisionId: input.decisionId,
          batchIds: input.sets.map((s) => s.batchId),
          model: { policyVersion: input.policyVersion, parent: input.parent },
          harness: { version: harnessVersion(harness) },
          environment: environmentKeys(input.taskSet.sha256, verifier, deps.rollouts, input.harnessEnv),
          metrics: ledgerMetrics(facts, deps.gate.acceptReward, input.elapsedSeconds),
        });
      });
    },
  };
}
