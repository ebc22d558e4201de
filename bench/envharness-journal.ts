/**
 * What bench:envharness reads from one finished run's stores (its scratch data directory): the
 * held-out rollouts of two policy versions with what each did in the environment, how many
 * training and validation rollouts ran and in which variants, and the run's variant verdicts.
 */
import { artifactStoreFromConfig } from '../src/artifacts/from-config.js';
import type { ReinConfig } from '../src/config/schema.js';
import { endedAttempt, sessionSummaryOf } from '../src/environments/rollout-evidence.js';
import { recordedRewards } from '../src/rollouts/rewards.js';
import { refusalRegExps } from '../src/rollouts/failure-class.js';
import type { FailureClass, Rollout } from '../src/rollouts/rollout.js';
import { traceStoreFromConfig } from '../src/store/open.js';
import type { TraceStore } from '../src/store/trace-store.js';

/** One held-out rollout as the bench measures it (isGiveUp's inputs, and the steps). */
export interface HeldoutRollout {
  taskId: string;
  /** reward > 0; null when it was not scored (Rein's machinery failed, not the policy). */
  success: boolean | null;
  failureClass: FailureClass | null;
  /** Tool calls in the environment (its `environment` event's steps); null without the event. */
  toolCalls: number | null;
  toolErrors: number;
  /** Model calls of its last attempt (the journal). */
  modelCalls: number;
  /** The last model reply was a final answer: no tool call, some text (the harness's loop ends only on one). */
  answered: boolean;
  /** The last model reply matched the run's refusal patterns (or carried a `refusal`), or the runner classed it so. */
  refused: boolean;
}

export interface VariantVerdictRecord {
  name: string;
  /** Its variantId, as the rollouts' `environment` events name it. */
  id: string;
  kept: boolean;
  reason: string;
  solvedShare: number | null;
}

export interface RunEvidence {
  base: HeldoutRollout[];
  final: HeldoutRollout[];
  /** Training rollouts (every batch but held-out replays and variant checks), and those run in a variant. */
  training: { rollouts: number; inVariants: number; byVariant: Record<string, number> };
  /** Rollouts spent checking variants (`<batch>-validate`): nothing trains on them. */
  validationRollouts: number;
  verdicts: VariantVerdictRecord[];
}

const heldoutPrefix = (version: string) => `heldout.${version}.`;
const batchOf = (rollout: Rollout): string =>
  typeof rollout.metadata.batchId === 'string' ? rollout.metadata.batchId : rollout.id;

/** Reads a finished run's evidence; `baseVersion` and `finalVersion` name the two held-out replays compared. */
export async function readRunEvidence(
  config: ReinConfig,
  runId: string,
  baseVersion: string,
  finalVersion: string,
): Promise<RunEvidence> {
  const store = await traceStoreFromConfig(config);
  try {
    const rollouts = await allRollouts(store);
    const patterns = refusalRegExps(config.rollouts.refusalPatterns);
    const heldout = async (version: string) =>
      Promise.all(
        rollouts
          .filter((r) => batchOf(r).startsWith(heldoutPrefix(version)))
          .map((r) => heldoutRollout(store, r, patterns)),
      );
    const isHeldout = (r: Rollout) => batchOf(r).startsWith('heldout.');
    const validation = rollouts.filter((r) => !isHeldout(r) && batchOf(r).endsWith('-validate'));
    const training = rollouts.filter((r) => !isHeldout(r) && !batchOf(r).endsWith('-validate'));
    return {
      base: await heldout(baseVersion),
      final: await heldout(finalVersion),
      training: await trainingVariants(store, training),
      validationRollouts: validation.length,
      verdicts: await variantVerdicts(config, runId),
    };
  } finally {
    await store.close();
  }
}

async function allRollouts(store: TraceStore): Promise<Rollout[]> {
  const all: Rollout[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await store.listRollouts({ limit: 500, ...(after && { after }) });
    all.push(...page.items);
    if (page.next === null) return all;
    after = page.next;
  }
}

async function heldoutRollout(store: TraceStore, rollout: Rollout, refusals: RegExp[]): Promise<HeldoutRollout> {
  const [events, calls] = await Promise.all([store.listEvents(rollout.id), store.listCalls(rollout.id)]);
  const reward = recordedRewards(events).verified;
  const success = reward === undefined ? null : reward > 0;
  const lastCalls = calls.filter((c) => c.attempt === rollout.attempts);
  const ended = endedAttempt({ rollout, events, lastCall: lastCalls.at(-1) }, success, refusals);
  return {
    taskId: rollout.taskId ?? rollout.id,
    success,
    failureClass: rollout.failureClass,
    toolCalls: ended.steps,
    toolErrors: ended.toolErrors,
    modelCalls: lastCalls.length,
    answered: ended.answered,
    refused: ended.refused,
  };
}

/** Which variant each training rollout's last attempt ran in (its `environment` event), counted. */
async function trainingVariants(store: TraceStore, training: Rollout[]): Promise<RunEvidence['training']> {
  const byVariant: Record<string, number> = {};
  for (const rollout of training) {
    const session = sessionSummaryOf(await store.listEvents(rollout.id), rollout.attempts);
    const variant = session?.variant ?? null;
    if (variant !== null) byVariant[variant] = (byVariant[variant] ?? 0) + 1;
  }
  const inVariants = Object.values(byVariant).reduce((a, b) => a + b, 0);
  return { rollouts: training.length, inVariants, byVariant };
}

/** The run's verdicts, as the variant step wrote them (runs/<run>/variants/<variant id>.json). */
async function variantVerdicts(config: ReinConfig, runId: string): Promise<VariantVerdictRecord[]> {
  const artifacts = artifactStoreFromConfig(config);
  const uris = await artifacts.list(`runs/${runId}/variants/`);
  const records = await Promise.all(
    uris.map(async (uri) => JSON.parse((await artifacts.get(uri)).toString('utf8')) as Record<string, unknown>),
  );
  return records
    .map((r) => ({
      name: String(r.name),
      id: String(r.variant),
      kept: r.kept === true,
      reason: String(r.reason ?? ''),
      solvedShare: typeof r.solvedShare === 'number' ? r.solvedShare : null,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}
