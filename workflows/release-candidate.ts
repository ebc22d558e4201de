import { proxyActivities, setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { GateSummary } from '../activities/release.js';
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
import { scoredRollouts } from './rollouts-activity.js';
import { sendNotification } from './notify.js';
import type { HeldoutSelection } from './task-selection.js';

const { productionPolicy, gateCandidate, promotePolicy, recordLedgerEntry } =
  proxyActivities<Activities>(REGISTRY_ACTIVITY);

export interface ReleaseCandidateInput {
  candidate: string;
  /** The configured base policy: production when the registry never had one. */
  base: { version: string; checkpointUri: string };
  heldout: HeldoutSelection;
  samplesPerTask: number;
  configHash: string;
  /** Move production when the gate passes. */
  promote: boolean;
  /** Who asks: `run:<id>` or `cli:<user>`; recorded with the promotion. */
  actor: string;
  runId?: string;
  iteration?: number;
  heartbeatTimeoutSeconds?: number;
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

  const replay = (policyVersion: string, batchId: string) =>
    scoredRollouts(
      `held-out replay: ${heldout.taskIds.length} tasks x ${samplesPerTask} on ${policyVersion}`,
      input.heartbeatTimeoutSeconds,
      {
        batchId,
        taskSet: heldout.taskSet,
        taskIds: heldout.taskIds,
        samplesPerTask,
        mode: 'eval',
        policyVersion,
        ...(heldout.harnessEnv && { harnessEnv: heldout.harnessEnv }),
      },
    );
  const incumbentSet = {
    batchId: heldoutBatchId(incumbent, input.configHash),
    taskIds: heldout.taskIds,
    samplesPerTask,
  };
  const candidateSet = {
    batchId: heldoutBatchId(candidate, input.configHash),
    taskIds: heldout.taskIds,
    samplesPerTask,
  };
  const incumbentHeldout = await replay(incumbent, incumbentSet.batchId);
  const candidateHeldout = await replay(candidate, candidateSet.batchId);

  upsertSearchAttributes([{ key: ReinStage, value: 'gate' }]);
  const decisionId = decisionIdFor(candidate, incumbent, input.configHash, heldout.taskIds.length, samplesPerTask);
  const gate = await gateCandidate.executeWithOptions(quick, [
    { decisionId, candidate, incumbent, candidateSet, incumbentSet },
  ]);
  upsertSearchAttributes([{ key: ReinVerdict, value: gate.verdict }]);
  if (gate.acceptedRate) upsertSearchAttributes([{ key: ReinHeldoutSuccess, value: gate.acceptedRate.candidate }]);
  let promoted = false;
  if (gate.verdict === 'pass' && input.promote) {
    upsertSearchAttributes([{ key: ReinStage, value: 'promote' }]);
    await promotePolicy.executeWithOptions(quick, [
      { version: candidate, decisionId: gate.decisionId, actor: input.actor },
    ]);
    promoted = true;
  }
  // Refused releases are rows in the ledgers too: what was tried, and what it measured.
  await recordLedgerEntry.executeWithOptions(quick, [
    {
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
      decisionId: gate.decisionId,
    },
  ]);
  setCurrentDetails(`${candidate} against production ${incumbent}: ${gateLine({ ...gate, promoted })}`);
  if (promoted || gate.verdict !== 'pass') {
    await sendNotification({
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
  upsertSearchAttributes([{ key: ReinStage, value: 'done' }]);
  return { candidate, incumbent, candidateHeldout, incumbentHeldout, gate, promoted };
}
