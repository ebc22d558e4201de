import type { ActivityOptions } from '@temporalio/common';
import { proxyActivities, setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { GateSummary, LedgerInput, RolloutSetRef } from '../activities/release.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import { decisionIdFor, heldoutBatchId } from '../src/gate/release-ids.js';
import {
  ReinHeldoutSuccess,
  ReinIteration,
  ReinPolicyVersion,
  ReinRunId,
  ReinStage,
  ReinVerdict,
} from './search-attributes.js';
import { callOptions, REGISTRY_ACTIVITY } from './activity-options.js';
import { PromotionFailure } from './failures.js';
import { gateLine } from './summaries.js';
import { heldoutReplay } from './rollouts-activity.js';
import { sendNotification } from './notify.js';
import type { ShardSettings } from '../src/rollouts/shards.js';
import type { HeldoutSelection } from './task-selection.js';

const { productionPolicy, gateCandidate, promotePolicy, recordLedgerEntry } =
  proxyActivities<Activities>(REGISTRY_ACTIVITY);

export interface ReleaseCandidateInput {
  candidate: string;
  /** The configured base policy: production when the registry never had one. */
  base: { version: string; checkpointUri: string };
  heldout: HeldoutSelection;
  samplesPerTask: number;
  /** The run's config, stored in the artifact store: its harness replays, its gate rules judge. */
  configHash: string;
  /**
   * The harness's version (harnessVersion of the config's harness), part of the replay and decision
   * ids so runs with different harnesses never share a replay. Absent in releases started before it was.
   */
  harnessVersion?: string;
  /** Move production when the gate passes. */
  promote: boolean;
  /** Who asks: `run:<id>` or `cli:<user>`; recorded with the promotion. */
  actor: string;
  runId?: string;
  iteration?: number;
  heartbeatTimeoutSeconds?: number;
  /** How its held-out replays split over workers (the run's rollouts.shard); default: DEFAULT_SHARD_SETTINGS. */
  shards?: ShardSettings;
  /** The environment variants the candidate's own iteration trained in, which its decision records. */
  trainedIn?: string[];
}

export interface ReleaseCandidateResult {
  candidate: string;
  incumbent: string;
  candidateHeldout: RunRolloutsSummary;
  incumbentHeldout: RunRolloutsSummary;
  gate: GateSummary;
  promoted: boolean;
}

/**
 * A release: replay the held-out tasks with the candidate and with production (the incumbent),
 * paired by task and sample; apply the gate; promote on a pass when asked; record the release
 * in the ledgers.
 */
export async function releaseCandidate(input: ReleaseCandidateInput): Promise<ReleaseCandidateResult> {
  const startedAt = Date.now();
  const { candidate, heldout, samplesPerTask } = input;
  const quick = callOptions(input.heartbeatTimeoutSeconds);
  upsertSearchAttributes([
    { key: ReinStage, value: 'release-replay' },
    { key: ReinPolicyVersion, value: candidate },
    // A run's releases are listed with it in the UI (ReinRunId = …), refused ones by ReinVerdict = 'fail'.
    ...(input.runId ? [{ key: ReinRunId, value: input.runId }] : []),
    ...(input.iteration !== undefined ? [{ key: ReinIteration, value: input.iteration }] : []),
  ]);
  const incumbent = await productionPolicy.executeWithOptions(quick, [
    { base: input.base, candidate, actor: input.actor },
  ]);
  if (incumbent === candidate)
    throw new PromotionFailure(`${candidate} already serves production; there is nothing to compare it with`);

  const incumbentSet = heldoutSet(input, incumbent);
  const candidateSet = heldoutSet(input, candidate);
  const incumbentHeldout = await replayHeldout(input, incumbent, incumbentSet.batchId);
  const candidateHeldout = await replayHeldout(input, candidate, candidateSet.batchId);

  upsertSearchAttributes([{ key: ReinStage, value: 'gate' }]);
  const decisionId = decisionIdFor(
    candidate,
    incumbent,
    input.configHash,
    heldout.taskIds.length,
    samplesPerTask,
    input.harnessVersion,
  );
  const gate = await gateCandidate.executeWithOptions(quick, [
    {
      decisionId,
      candidate,
      incumbent,
      candidateSet,
      incumbentSet,
      configHash: input.configHash,
      ...(input.runId && { runId: input.runId }),
      ...(input.trainedIn && { trainedIn: input.trainedIn }),
    },
  ]);
  upsertSearchAttributes([{ key: ReinVerdict, value: gate.verdict }]);
  if (gate.acceptedRate) upsertSearchAttributes([{ key: ReinHeldoutSuccess, value: gate.acceptedRate.candidate }]);
  const promoted = gate.verdict === 'pass' && input.promote ? await promoteCandidate(input, gate, quick) : false;
  // Refused releases are rows in the ledgers too: what was tried, and what it measured.
  await recordLedgerEntry.executeWithOptions(quick, [
    releaseLedgerEntry(input, incumbent, candidateSet, gate.decisionId, startedAt),
  ]);
  setCurrentDetails(`${candidate} against production ${incumbent}: ${gateLine({ ...gate, promoted })}`);
  if (promoted || gate.verdict !== 'pass') await notifyOutcome(input, incumbent, gate, promoted);
  upsertSearchAttributes([{ key: ReinStage, value: 'done' }]);
  return { candidate, incumbent, candidateHeldout, incumbentHeldout, gate, promoted };
}

/** A version's held-out replay as the gate reads it: its batch (per version, config and harness), tasks, samples. */
function heldoutSet(input: ReleaseCandidateInput, policyVersion: string): RolloutSetRef {
  return {
    batchId: heldoutBatchId(policyVersion, input.configHash, input.harnessVersion),
    taskIds: input.heldout.taskIds,
    samplesPerTask: input.samplesPerTask,
  };
}

function replayHeldout(
  input: ReleaseCandidateInput,
  policyVersion: string,
  batchId: string,
): Promise<RunRolloutsSummary> {
  return heldoutReplay(
    {
      heldout: input.heldout,
      samplesPerTask: input.samplesPerTask,
      policyVersion,
      batchId,
      configHash: input.configHash,
    },
    input.heartbeatTimeoutSeconds,
    input.shards,
  );
}

/** Moves production to the candidate the gate passed; true once it did. */
async function promoteCandidate(
  input: ReleaseCandidateInput,
  gate: GateSummary,
  options: ActivityOptions,
): Promise<true> {
  upsertSearchAttributes([{ key: ReinStage, value: 'promote' }]);
  await promotePolicy.executeWithOptions(options, [
    { version: input.candidate, decisionId: gate.decisionId, actor: input.actor },
  ]);
  return true;
}

/** The release's row in the ledgers: the candidate against the incumbent, measured on the candidate's replay. */
function releaseLedgerEntry(
  input: ReleaseCandidateInput,
  incumbent: string,
  candidateSet: RolloutSetRef,
  decisionId: string,
  startedAt: number,
): LedgerInput {
  const { candidate, heldout } = input;
  return {
    id: `release.${candidate}`,
    kind: 'release',
    runId: input.runId ?? null,
    iteration: input.iteration ?? null,
    policyVersion: candidate,
    parent: incumbent,
    taskSet: heldout.taskSet,
    ...(heldout.harnessEnv && { harnessEnv: heldout.harnessEnv }),
    sets: [candidateSet],
    elapsedSeconds: (Date.now() - startedAt) / 1000,
    decisionId,
    configHash: input.configHash,
  };
}

/** Tells the webhook that production moved to the candidate, or that the gate refused it. */
function notifyOutcome(
  input: ReleaseCandidateInput,
  incumbent: string,
  gate: GateSummary,
  promoted: boolean,
): Promise<void> {
  const { candidate } = input;
  return sendNotification({
    event: promoted ? 'promotion' : 'refusal',
    runId: input.runId ?? null,
    iteration: input.iteration ?? null,
    versions: { candidate, incumbent, production: promoted ? candidate : incumbent },
    verdict: gate.verdict,
    reasons: gate.reasons,
    decisionId: gate.decisionId,
    ...(gate.acceptedRate && { heldout: gate.acceptedRate }),
    actor: input.actor,
  });
}
