import { proxyActivities, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { RunRolloutsInput, RunRolloutsSummary } from '../activities/run-rollouts.js';
import type { UpdatePolicySummary } from '../activities/update-policy.js';
import { rolloutIdFor } from '../src/rollouts/rollout-id.js';
import type { BatchStageResult } from '../src/samples/stage.js';
import { ReinIteration, ReinMeanReward, ReinPolicyVersion, ReinRunId, ReinStage } from './search-attributes.js';

/** A set of tasks by reference: the file, its pinned hash, and which of its tasks. */
export interface TaskSelection {
  taskSet: RunRolloutsInput['taskSet'];
  taskIds: string[];
}

export interface TrainingIterationInput {
  runId: string;
  iteration: number;
  /** The policy this iteration samples from and trains (the new version's parent). */
  policyVersion: string;
  configHash: string;
  train: TaskSelection & { samplesPerTask: number };
  /** Held-out tasks replayed with the candidate (one sample each, the harness's eval settings). */
  heldout?: TaskSelection & { harnessEnv?: Record<string, string> };
  /** How long a worker may go silent in a stage before the stage moves to another worker (default 60). */
  heartbeatTimeoutSeconds?: number;
}

export interface TrainingIterationResult {
  iteration: number;
  parent: string;
  candidate: string;
  rollouts: RunRolloutsSummary;
  batch: { uri: string; contentHash: string; reportUri: string } & BatchStageResult['summary'];
  update: UpdatePolicySummary;
  heldout: RunRolloutsSummary | null;
}

/** The rollouts stage, with the timeouts and retries every set of rollouts gets. */
export const rolloutsActivity = (summary: string, heartbeatTimeoutSeconds = 60) =>
  proxyActivities<Activities>({
    startToCloseTimeout: '4 hours',
    heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
    retry: { maximumAttempts: 5, nonRetryableErrorTypes: ['RolloutSetupError', 'TaskSetChanged', 'UnknownTask'] },
    summary,
  }).runRollouts;

/**
 * One training iteration: rollouts with the current policy → batch → policy update (a candidate,
 * registered and served) → held-out replay of the candidate. Each stage is an activity that a
 * retry resumes rather than repeats; only references and summaries pass through history.
 */
export async function trainingIteration(input: TrainingIterationInput): Promise<TrainingIterationResult> {
  const { runId, iteration, policyVersion: parent, heartbeatTimeoutSeconds = 60 } = input;
  const batchId = `${runId}.it${iteration}`;
  const stage = (name: string) => upsertSearchAttributes([{ key: ReinStage, value: name }]);
  upsertSearchAttributes([
    { key: ReinRunId, value: runId },
    { key: ReinIteration, value: iteration },
    { key: ReinPolicyVersion, value: parent },
    { key: ReinStage, value: 'rollouts' },
  ]);
  upsertMemo({ configHash: input.configHash });

  const rollouts = await rolloutsActivity(`train rollouts: ${input.train.taskIds.length} tasks x ${input.train.samplesPerTask} on ${parent}`, heartbeatTimeoutSeconds)({
    batchId,
    taskSet: input.train.taskSet,
    taskIds: input.train.taskIds,
    samplesPerTask: input.train.samplesPerTask,
    mode: 'train',
    policyVersion: parent,
  });
  upsertMemo({ harnessVersion: rollouts.harnessVersion });
  if (rollouts.meanReward !== null) upsertSearchAttributes([{ key: ReinMeanReward, value: rollouts.meanReward }]);

  stage('batch');
  const { buildBatch } = proxyActivities<Activities>({
    startToCloseTimeout: '30 minutes',
    retry: { maximumAttempts: 3, nonRetryableErrorTypes: ['DataQualityError'] },
    summary: `batch from ${rollouts.total} rollouts`,
  });
  const rolloutIds = input.train.taskIds.flatMap((task) => Array.from({ length: input.train.samplesPerTask }, (_, sample) => rolloutIdFor(batchId, task, sample)));
  const built = await buildBatch({ runId, iteration, policyVersion: parent, configHash: input.configHash, rolloutIds });

  stage('update');
  const candidate = `${runId}.v${iteration}`;
  const { updatePolicy } = proxyActivities<Activities>({
    startToCloseTimeout: '6 hours',
    heartbeatTimeout: `${heartbeatTimeoutSeconds} seconds`,
    retry: { maximumAttempts: 3, nonRetryableErrorTypes: ['PolicyUpdateError'] },
    summary: `train ${candidate} from ${parent} on ${built.summary.sequences} sequences`,
  });
  const update = await updatePolicy({ runId, iteration, parentVersion: parent, newVersion: candidate, batchUri: built.batch.uri, batchContentHash: built.batch.contentHash });

  let heldout: RunRolloutsSummary | null = null;
  if (input.heldout) {
    stage('heldout');
    upsertSearchAttributes([{ key: ReinPolicyVersion, value: candidate }]);
    heldout = await rolloutsActivity(`held-out replay: ${input.heldout.taskIds.length} tasks on ${candidate}`, heartbeatTimeoutSeconds)({
      batchId: `${batchId}.heldout`,
      taskSet: input.heldout.taskSet,
      taskIds: input.heldout.taskIds,
      samplesPerTask: 1,
      mode: 'eval',
      policyVersion: candidate,
      ...(input.heldout.harnessEnv && { harnessEnv: input.heldout.harnessEnv }),
    });
  }
  stage('done');
  return {
    iteration,
    parent,
    candidate,
    rollouts,
    batch: { uri: built.batch.uri, contentHash: built.batch.contentHash, reportUri: built.report.uri, ...built.summary },
    update,
    heldout,
  };
}
