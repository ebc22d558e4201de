import {
  executeChild,
  proxyActivities,
  setCurrentDetails,
  upsertMemo,
  workflowInfo,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { LedgerInput } from '../activities/release.js';
import type { RunRolloutsSummary } from '../activities/run-rollouts.js';
import type { UpdatePolicySummary } from '../activities/update-policy.js';
import { iterationBatchId } from '../src/rollouts/rollout-id.js';
import { DEFAULT_SHARD_SETTINGS, type ShardSettings } from '../src/rollouts/shards.js';
import type { BatchStageResult } from '../src/samples/stage.js';
import {
  BATCH_ACTIVITY,
  callOptions,
  DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
  REGISTRY_ACTIVITY,
  TRAINER_ACTIVITY,
} from './activity-options.js';
import { releaseCandidate, type ReleaseCandidateResult } from './release-candidate.js';
import { assessedVariants, withVariants, type IterationVariants } from './iteration-variants.js';
import { rolloutSet, trainingSet } from './rollout-set.js';
import { runsInShards } from './rollout-shards.js';
import { scoredRollouts } from './rollouts-activity.js';
import {
  ReinHeldoutSuccess,
  ReinIteration,
  ReinMeanReward,
  ReinPolicyVersion,
  ReinRunId,
  ReinStage,
} from './search-attributes.js';
import { iterationSummary } from './summaries.js';
import type { HeldoutSelection, TrainSelection } from './task-selection.js';

const { buildBatch } = proxyActivities<Activities>(BATCH_ACTIVITY);
const { updatePolicy } = proxyActivities<Activities>(TRAINER_ACTIVITY);
const { recordLedgerEntry } = proxyActivities<Activities>(REGISTRY_ACTIVITY);

export interface TrainingIterationInput {
  runId: string;
  iteration: number;
  /** The policy this iteration samples from and trains (the new version's parent). */
  policyVersion: string;
  /** The run's config, stored in the artifact store: every stage loads the run's own harness and settings by it. */
  configHash: string;
  /** The run's harness version, in its held-out replay and decision ids (see heldoutBatchId). */
  harnessVersion?: string;
  train: TrainSelection;
  /** Held-out tasks replayed with the candidate and with production, then the gate (the harness's eval settings). */
  heldout?: HeldoutSelection;
  /** How the candidate is released: k samples per held-out task, whether a pass moves production, the run's base. */
  release?: { samplesPerTask: number; promote: boolean; base: { version: string; checkpointUri: string } };
  /** How long a worker may go silent in a stage before the stage moves to another worker (default 60). */
  heartbeatTimeoutSeconds?: number;
  /** How the rollout sets are split over workers (the config's rollouts.shard); default: DEFAULT_SHARD_SETTINGS. */
  shards?: ShardSettings;
  /**
   * The asynchronous schedule: the training rollouts already run (while the previous iteration
   * updated), from `policyVersion` — one version behind the policy this iteration trains. The
   * iteration builds its batch from them instead of running its own.
   */
  sampled?: { policyVersion: string; rollouts: RunRolloutsSummary };
  /** The run's config declares environment variants: check them and mix the kept ones into training. */
  environmentVariants?: boolean;
}

/** An iteration's stages in order; `done` marks when the last one ended. */
export type IterationStage = 'rollouts' | 'batch' | 'update' | 'heldout' | 'ledger' | 'done';

/**
 * The memo key under which an iteration keeps when each of its stages began (workflow time, ms):
 * the console's stage durations come from it, with no history read and no worker running.
 */
export const STAGES_MEMO = 'stages';

export interface TrainingIterationResult {
  iteration: number;
  parent: string;
  candidate: string;
  /** The version the training rollouts sampled from: the parent, or (schedule async) the one before it. */
  sampledFrom?: string;
  /** The training rollouts; their meanRewardByTask is left out (empty) to keep the run's history small. */
  rollouts: RunRolloutsSummary;
  batch: { uri: string; contentHash: string; reportUri: string } & BatchStageResult['summary'];
  update: UpdatePolicySummary;
  heldout: RunRolloutsSummary | null;
  /** What the iteration did with the run's environment variants; absent without them. */
  variants?: IterationVariants;
  /**
   * `incumbentHeldout`: production's replay of the same held-out tasks (absent from iterations run before it was kept).
   */
  release:
    | (Pick<ReleaseCandidateResult, 'incumbent' | 'gate' | 'promoted'> &
        Partial<Pick<ReleaseCandidateResult, 'incumbentHeldout'>>)
    | null;
}

/**
 * One training iteration: rollouts with the current policy → batch → policy update (a candidate,
 * registered and served) → held-out replay of the candidate. Each stage is an activity that a
 * retry resumes rather than repeats; only references and summaries pass through history.
 */
export async function trainingIteration(input: TrainingIterationInput): Promise<TrainingIterationResult> {
  const {
    runId,
    iteration,
    policyVersion: parent,
    heartbeatTimeoutSeconds = DEFAULT_HEARTBEAT_TIMEOUT_SECONDS,
  } = input;
  const startedAt = Date.now();
  const batchId = iterationBatchId(runId, iteration);
  const stages: Partial<Record<IterationStage, number>> = {};
  const stage = (name: IterationStage) => {
    stages[name] = Date.now();
    upsertSearchAttributes([{ key: ReinStage, value: name }]);
    upsertMemo({ [STAGES_MEMO]: stages });
  };
  upsertSearchAttributes([
    { key: ReinRunId, value: runId },
    { key: ReinIteration, value: iteration },
    { key: ReinPolicyVersion, value: parent },
  ]);
  upsertMemo({ configHash: input.configHash });
  stage('rollouts');

  const { train, variants: planned } = await trainingTasks(input, batchId, heartbeatTimeoutSeconds);
  const rollouts =
    input.sampled?.rollouts ?? (await trainRollouts({ ...input, train }, batchId, heartbeatTimeoutSeconds));
  const variants = planned && (await assessedVariants(input, batchId, train, planned));
  upsertMemo({ harnessVersion: rollouts.harnessVersion });
  if (rollouts.meanReward !== null) upsertSearchAttributes([{ key: ReinMeanReward, value: rollouts.meanReward }]);

  stage('batch');
  const built = await buildTrainingBatch({ ...input, train }, batchId, rollouts.total, heartbeatTimeoutSeconds);
  // Nothing downstream pairs training rollouts by task (held-out replays keep theirs).
  const trained = { ...rollouts, meanRewardByTask: {} };

  stage('update');
  const candidate = `${runId}.v${iteration}`;
  const update = await trainCandidate(input, candidate, built, heartbeatTimeoutSeconds);

  if (input.heldout) stage('heldout');
  const { heldout, release } = await releaseAsChild(
    input,
    candidate,
    heartbeatTimeoutSeconds,
    trainedInVariants(variants),
  );
  setCurrentDetails(
    iterationSummary({
      iteration,
      candidate,
      meanReward: rollouts.meanReward,
      ...(release && { gate: { ...release.gate, promoted: release.promoted } }),
    }),
  );
  stage('ledger');
  await recordLedgerEntry.executeWithOptions(callOptions(heartbeatTimeoutSeconds), [
    iterationLedgerEntry(
      { ...input, train },
      batchId,
      candidate,
      startedAt,
      release?.gate.decisionId ?? null,
      variants,
    ),
  ]);
  stage('done');
  const batch = { uri: built.batch.uri, contentHash: built.batch.contentHash, reportUri: built.report.uri };
  return {
    iteration,
    parent,
    candidate,
    sampledFrom: input.sampled?.policyVersion ?? parent,
    rollouts: trained,
    batch: { ...batch, ...built.summary },
    update,
    heldout,
    ...(variants && { variants }),
    release,
  };
}

/** The training set: the iteration's tasks, with the run's kept variants mixed in when it declares any. */
function trainingTasks(
  input: TrainingIterationInput,
  batchId: string,
  heartbeatTimeoutSeconds: number,
): Promise<{ train: TrainingIterationInput['train']; variants: IterationVariants | null }> {
  if (!input.environmentVariants || input.sampled) return Promise.resolve({ train: input.train, variants: null });
  return withVariants(input, batchId, (id, selection) =>
    trainRollouts({ ...input, train: selection }, id, heartbeatTimeoutSeconds, 'validate'),
  );
}

/**
 * The iteration's training rollouts: one activity when the set fits one shard (as before sharding),
 * else a rolloutSet child that fans the shards out over the task queue, which keeps this history
 * a few events long whatever the set's size.
 */
function trainRollouts(
  input: TrainingIterationInput,
  batchId: string,
  heartbeatTimeoutSeconds: number,
  label: 'train' | 'validate' = 'train',
): Promise<RunRolloutsSummary> {
  const { train, policyVersion: parent } = input;
  const set = trainingSet(batchId, input.configHash, train, parent);
  const summary = `${label} rollouts: ${train.taskIds.length} tasks x ${train.samplesPerTask} on ${parent}`;
  const shards = input.shards ?? DEFAULT_SHARD_SETTINGS;
  if (!runsInShards(set, shards)) return scoredRollouts(summary, heartbeatTimeoutSeconds, set, shards);
  return executeChild(rolloutSet, {
    // Not `<run>-it<n>-rollouts`: a run's own set ahead (the asynchronous schedule) may hold that id.
    workflowId: `${workflowInfo().workflowId}-${label}-set`,
    staticSummary: summary,
    args: [{ ...set, heartbeatTimeoutSeconds, shards, rescore: true }],
  });
}

type BuiltBatch = Awaited<ReturnType<Activities['buildBatch']>>;

/** The batch from the iteration's training rollouts, by selection (not 10,000 ids in the history). */
function buildTrainingBatch(
  input: TrainingIterationInput,
  batchId: string,
  rollouts: number,
  heartbeatTimeoutSeconds: number,
): Promise<BuiltBatch> {
  const { runId, iteration, policyVersion: parent } = input;
  const selection = { batchId, taskIds: input.train.taskIds, samplesPerTask: input.train.samplesPerTask };
  return buildBatch.executeWithOptions(callOptions(heartbeatTimeoutSeconds, `batch from ${rollouts} rollouts`), [
    { runId, iteration, policyVersion: parent, configHash: input.configHash, selection },
  ]);
}

/** The policy update: the candidate trained from the iteration's policy on the batch, then registered and served. */
function trainCandidate(
  input: TrainingIterationInput,
  candidate: string,
  built: BuiltBatch,
  heartbeatTimeoutSeconds: number,
): Promise<UpdatePolicySummary> {
  const { runId, iteration, policyVersion: parent } = input;
  return updatePolicy.executeWithOptions(
    callOptions(heartbeatTimeoutSeconds, `train ${candidate} from ${parent} on ${built.summary.sequences} sequences`),
    [
      {
        runId,
        iteration,
        parentVersion: parent,
        newVersion: candidate,
        batchUri: built.batch.uri,
        batchContentHash: built.batch.contentHash,
      },
    ],
  );
}

/**
 * The candidate's release as a child workflow: held-out replays of it and of production, the gate, a promotion when
 * asked.
 */
async function releaseAsChild(
  input: TrainingIterationInput,
  candidate: string,
  heartbeatTimeoutSeconds: number,
  trainedIn: string[],
): Promise<Pick<TrainingIterationResult, 'heldout' | 'release'>> {
  const { runId, iteration, policyVersion: parent, heldout } = input;
  if (!heldout) return { heldout: null, release: null };
  upsertSearchAttributes([{ key: ReinPolicyVersion, value: candidate }]);
  const released = await executeChild(releaseCandidate, {
    workflowId: `${runId}-it${iteration}-release`,
    staticSummary: `it${iteration}: release ${candidate}, held-out replay against production and the gate`,
    args: [
      {
        candidate,
        base: input.release?.base ?? { version: parent, checkpointUri: '' },
        heldout,
        samplesPerTask: input.release?.samplesPerTask ?? 1,
        configHash: input.configHash,
        ...(input.harnessVersion && { harnessVersion: input.harnessVersion }),
        promote: input.release?.promote ?? false,
        actor: `run:${runId}`,
        runId,
        iteration,
        heartbeatTimeoutSeconds,
        ...(input.shards && { shards: input.shards }),
        ...(trainedIn.length > 0 && { trainedIn }),
      },
    ],
  });
  const success = released.gate.acceptedRate?.candidate;
  if (success !== undefined) upsertSearchAttributes([{ key: ReinHeldoutSuccess, value: success }]);
  return {
    heldout: released.candidateHeldout,
    release: {
      incumbent: released.incumbent,
      gate: released.gate,
      promoted: released.promoted,
      incumbentHeldout: released.incumbentHeldout,
    },
  };
}

/** The iteration's row in the ledgers: its candidate, measured on its training rollouts. */
/** The ids of the variants the iteration's training rollouts ran in (none when no task ran in one). */
const trainedInVariants = (variants: IterationVariants | null): string[] =>
  variants && variants.variantTasks > 0 ? variants.kept.map((k) => k.id) : [];

function iterationLedgerEntry(
  input: TrainingIterationInput,
  batchId: string,
  candidate: string,
  startedAt: number,
  decisionId: string | null,
  variants: IterationVariants | null,
): LedgerInput {
  return {
    id: batchId,
    kind: 'iteration',
    runId: input.runId,
    iteration: input.iteration,
    policyVersion: candidate,
    parent: input.policyVersion,
    taskSet: input.train.taskSet,
    sets: [{ batchId, taskIds: input.train.taskIds, samplesPerTask: input.train.samplesPerTask }],
    elapsedSeconds: (Date.now() - startedAt) / 1000,
    decisionId,
    configHash: input.configHash,
    // The variants its training tasks ran in: part of the environment the row was measured in.
    ...(trainedInVariants(variants).length > 0 && { environmentVariants: trainedInVariants(variants) }),
  };
}
