import type { PolicyRegistry, StoredDecision } from '../registry/policy-registry.js';
import { harnessVersion, type HarnessSettings } from '../rollouts/harness-spec.js';
import { selectionRolloutIds, type RolloutSelection } from '../rollouts/rollout-id.js';
import type { TraceStore } from '../store/trace-store.js';
import type { GateRules } from './config.js';
import { evaluateGate, pairOutcomes } from './gate.js';
import { readRolloutFacts } from './rollout-facts.js';

/** A candidate's held-out replay and the incumbent's, by reference, and the id their decision is kept under. */
export interface GateRequest {
  decisionId: string;
  candidate: string;
  incumbent: string;
  candidateSet: RolloutSelection;
  incumbentSet: RolloutSelection;
  /** The run's environment and its variants' ledger rows, recorded with the decision (absent without one). */
  environment?: DecisionEnvironment;
}

/** A decision's link to the environment ledger: the module, the variants checked so far and those training used. */
export interface DecisionEnvironment {
  module: string;
  trainedIn: string[];
  variants: Array<{ id: string; name: string; origin: 'declared' | 'rigger'; kept: boolean; ledgerId: string }>;
}

/** Where a decision's evidence is read and where it is kept, and what is recorded beside it. */
export interface GateSources {
  store: TraceStore;
  registry: PolicyRegistry;
  /** The gate's rules, recorded with the decision (less autoPromote: what a run does with a verdict). */
  gate: GateRules & { autoPromote?: boolean };
  /** The harness the replays ran, recorded by its version. */
  harness?: HarnessSettings;
  /** The gateway whose API serves each rollout's calls and events, linked from the decision. */
  gateway?: { url: string };
}

/**
 * The gate's decision on a candidate against the incumbent, kept in the registry with its
 * evidence: both replays' rollouts read from the trace store, paired by task and sample, judged
 * by the rules. Made once per decision id, except that an `insufficient` one is made again: the
 * replays may have been completed since. Throws GateInputError when the replays do not pair.
 * `beforeEach` is awaited before each rollout is read (see readRolloutFacts).
 */
export async function decideGate(
  sources: GateSources,
  request: GateRequest,
  beforeEach?: () => Promise<void>,
): Promise<StoredDecision> {
  const { registry } = sources;
  const existing = await registry.decision(request.decisionId);
  if (!existing || existing.verdict === 'insufficient') {
    const candidate = await readRolloutFacts(sources.store, selectionRolloutIds(request.candidateSet), beforeEach);
    const incumbent = await readRolloutFacts(sources.store, selectionRolloutIds(request.incumbentSet), beforeEach);
    const decision = evaluateGate(sources.gate, pairOutcomes(incumbent, candidate));
    const { autoPromote: _autoPromote, ...rules } = sources.gate;
    await registry.saveDecision({
      id: request.decisionId,
      candidate: request.candidate,
      incumbent: request.incumbent,
      verdict: decision.verdict,
      record: {
        ...decision,
        rules,
        candidate: { version: request.candidate, ...request.candidateSet },
        incumbent: { version: request.incumbent, ...request.incumbentSet },
        harnessVersion: sources.harness ? harnessVersion(sources.harness) : null,
        // Every rollout id resolves to its calls and events: GET /api/rollouts/{id}/calls on the gateway.
        traces: sources.gateway ? `${sources.gateway.url}/api/rollouts/{rolloutId}` : null,
        ...(request.environment && { environment: request.environment }),
      },
    });
  }
  return (await registry.decision(request.decisionId))!;
}
