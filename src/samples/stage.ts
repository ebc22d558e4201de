import type { ArtifactStore, StoredArtifact } from '../artifacts/artifact-store.js';
import type { SampleSettings } from '../config/schema.js';
import { recordedRewards } from '../rollouts/rewards.js';
import type { Rollout } from '../rollouts/rollout.js';
import type { TraceStore } from '../store/trace-store.js';
import type { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';
import { batchReportName, iterationArtifacts } from '../artifacts/iteration-artifacts.js';
import { encodeBatch } from './batch-artifact.js';
import { importanceSamplingOf } from './importance-sampling.js';
import { lossAggregationOf, type MergeMode } from './merge-modes.js';
import { assembleBatch, prepareRollout, type BatchOptions, type BatchReport, type PreparedRollout } from './batch.js';
import { toMergeCalls, type DriftReport } from './retokenize.js';

export interface BatchStageInput {
  /** The training run: artifacts of different runs never share a path. */
  runId?: string;
  iteration: number;
  /** The policy version the batch trains (the parent of the next one). */
  policyVersion: string;
  configHash: string;
  rolloutIds: string[];
  /** Policy versions oldest → newest, for the staleness bound and the report's count by versions behind. */
  lineage?: string[];
}

export interface DataQualityReport extends BatchReport {
  drift: DriftReport & { rate: number };
  rewardDisagreement: { compared: number; disagreeing: number; rate: number; rolloutIds: string[] };
}

/** What the stage returns: references and a small summary, never the data itself. */
export interface BatchStageResult {
  batch: StoredArtifact & { contentHash: string };
  report: StoredArtifact;
  summary: {
    rolloutsUsed: number;
    rolloutsExcluded: number;
    sequences: number;
    trainedTokens: number;
    meanReward: number | null;
    /** Absent from the results of workers that predate merge modes (kept in workflow histories). */
    mergeMode?: MergeMode;
    /** What exact merging gives on the journal, in every mode (see BatchReport). */
    mergeRate: number;
    driftRate: number;
    /** Kept rollouts by versions behind the trained policy (with the lineage known; see BatchReport). */
    keptByVersionsBehind?: Record<string, number>;
  };
}

/** The evidence is not trustworthy enough to train on; the report says why. */
export class DataQualityError extends Error {
  constructor(
    readonly problems: string[],
    readonly report: DataQualityReport,
    readonly reportUri: string,
  ) {
    super(`batch refused: ${problems.join('; ')} (report: ${reportUri})`);
    this.name = 'DataQualityError';
  }
}

interface BatchStageDeps {
  store: TraceStore;
  artifacts: ArtifactStore;
  settings: SampleSettings;
  tokenizer?: ChatTokenizer;
  /**
   * Awaited before each rollout is read and once all are (done = total): progress, and a turn for the caller's timers.
   */
  onRollout?: (done: number, total: number) => Promise<void> | void;
}

/**
 * Journal → batch artifact + data-quality report. The reward of a rollout is the latest reward
 * event appended with the admin identity (the verifier); one the harness appended with its own
 * key is kept apart and compared.
 */
export async function runBatchStage(input: BatchStageInput, deps: BatchStageDeps): Promise<BatchStageResult> {
  const { artifacts, settings, tokenizer } = deps;
  const options = batchOptionsOf(settings, input.lineage);
  const journal = await readRollouts(input.rolloutIds, options, deps);
  const batch = assembleBatch(journal.prepared, options);

  const { drift, disagreeing, compared } = journal;
  const report: DataQualityReport = {
    ...batch.report,
    drift: { ...drift, rate: drift.compared === 0 ? 0 : drift.drifted / drift.compared },
    rewardDisagreement: {
      compared,
      disagreeing: disagreeing.length,
      rate: compared === 0 ? 0 : disagreeing.length / compared,
      rolloutIds: disagreeing,
    },
  };
  const name = iterationArtifacts(input.runId, input.iteration);
  const reportArtifact = await artifacts.put(
    batchReportName(input.runId, input.iteration),
    `${JSON.stringify(report, null, 2)}\n`,
  );

  const problems = dataQualityProblems(report, settings.thresholds, input.rolloutIds.length, journal.unscored);
  if (problems.length > 0) throw new DataQualityError(problems, report, reportArtifact.uri);

  const encoded = encodeBatch(batch, {
    iteration: input.iteration,
    policyVersion: input.policyVersion,
    configHash: input.configHash,
    // The bare cap keeps the batch a trainer of before masking reads (same keys, same hash).
    ...(settings.importanceWeightCap !== undefined && { importanceWeightCap: settings.importanceWeightCap }),
    ...(settings.importanceSampling !== undefined && { importanceSampling: importanceSamplingOf(settings) }),
    ...(tokenizer?.fileSha256 && { tokenizerSha256: tokenizer.fileSha256 }),
  });
  const batchArtifact = await artifacts.put(
    `${name}/batch-${encoded.contentHash.slice(0, 16)}.safetensors`,
    encoded.bytes,
  );
  return {
    batch: { ...batchArtifact, contentHash: encoded.contentHash },
    report: reportArtifact,
    summary: summaryOf(report),
  };
}

function batchOptionsOf(settings: SampleSettings, lineage: string[] | undefined): BatchOptions {
  return {
    merge: settings.merge,
    estimator: settings.estimator,
    zeroVarianceGroups: settings.zeroVarianceGroups,
    lossAggregation: lossAggregationOf(settings),
    ...(settings.normConstant !== undefined && { normConstant: settings.normConstant }),
    maxPromptTokens: settings.maxPromptTokens,
    maxResponseTokens: settings.maxResponseTokens,
    truncated: settings.truncated,
    excludedFailureClasses: settings.excludedFailureClasses,
    incompleteGroups: settings.incompleteGroups,
    ...(lineage && {
      staleness: {
        lineage,
        ...(settings.maxVersionsBehind !== undefined && { maxVersionsBehind: settings.maxVersionsBehind }),
      },
    }),
  };
}

/** The rollouts as the batch needs them, with what the data-quality report counts while reading them. */
interface JournalReading {
  prepared: PreparedRollout[];
  drift: DriftReport;
  /** Rollouts with both a verified and a harness-reported reward. */
  compared: number;
  /** The ids of those whose two rewards disagree. */
  disagreeing: string[];
  /** Rollouts with no verified reward. */
  unscored: number;
}

async function readRollouts(
  rolloutIds: string[],
  options: BatchOptions,
  deps: BatchStageDeps,
): Promise<JournalReading> {
  const { store, tokenizer, onRollout } = deps;
  const detokenizer = tokenizer ?? { decode: (ids: readonly number[]) => ids.join(' ') };
  const reading: JournalReading = {
    prepared: [],
    drift: { compared: 0, drifted: 0, retokenized: 0, unusable: 0 },
    compared: 0,
    disagreeing: [],
    unscored: 0,
  };
  // One rollout at a time: its calls (whole prompts) are dropped once merged into sequences.
  for (const [done, id] of rolloutIds.entries()) {
    await onRollout?.(done, rolloutIds.length);
    const rollout = await store.getRollout(id);
    if (!rollout) throw new Error(`rollout ${id} is not in the trace store`);
    const events = await store.listEvents(id);
    const { verified, reported, disagrees } = recordedRewards(events);
    if (verified !== undefined && reported !== undefined) reading.compared++;
    if (verified === undefined) reading.unscored++;
    if (disagrees) reading.disagreeing.push(id);
    const calls = toMergeCalls(await store.listCalls(id, rollout.attempts), tokenizer);
    for (const key of Object.keys(reading.drift) as Array<keyof DriftReport>) reading.drift[key] += calls.drift[key];
    reading.prepared.push(
      prepareRollout(
        {
          rolloutId: id,
          groupId: rollout.taskId ?? id,
          reward: verified ?? null,
          failureClass: batchFailureClassOf(rollout),
          calls: calls.calls,
        },
        options,
        detokenizer,
      ),
    );
  }
  await onRollout?.(rolloutIds.length, rolloutIds.length);
  return reading;
}

/** The failure class the batch's exclusions see: a rollout that did not fail has none. */
function batchFailureClassOf(rollout: Rollout): string | null {
  return rollout.status === 'cancelled'
    ? 'cancelled'
    : rollout.status === 'queued' || rollout.status === 'running'
      ? 'unfinished'
      : rollout.status === 'failed'
        ? (rollout.failureClass ?? 'unclassified')
        : null;
}

/** Why the evidence is not trustworthy enough to train on (none: it is). */
function dataQualityProblems(
  report: DataQualityReport,
  thresholds: SampleSettings['thresholds'],
  total: number,
  unscored: number,
): string[] {
  const scoredShare = total === 0 ? 1 : (total - unscored) / total;
  return [
    report.drift.rate > thresholds.maxDriftRate &&
      `drift rate ${report.drift.rate.toFixed(3)} is above samples.thresholds.maxDriftRate ${thresholds.maxDriftRate}`,
    report.rollouts.used < thresholds.minRolloutsUsed &&
      `${report.rollouts.used} usable rollouts, fewer than samples.thresholds.minRolloutsUsed ${thresholds.minRolloutsUsed}`,
    scoredShare < thresholds.minScoredShare &&
      `only ${total - unscored} of ${total} rollouts were scored (${(100 * scoredShare).toFixed(1)}%, below samples.thresholds.minScoredShare ${thresholds.minScoredShare}); the rest were lost to faults (see the report's excluded counts): fix the fault and resume the run`,
    report.rewardDisagreement.rate > thresholds.maxRewardDisagreementRate &&
      `reward disagreement rate ${report.rewardDisagreement.rate.toFixed(3)} is above samples.thresholds.maxRewardDisagreementRate ${thresholds.maxRewardDisagreementRate}`,
  ].filter((p): p is string => typeof p === 'string');
}

function summaryOf(report: DataQualityReport): BatchStageResult['summary'] {
  const excludedCount = Object.values(report.rollouts.excluded).reduce((a, b) => a + (b ?? 0), 0);
  return {
    rolloutsUsed: report.rollouts.used,
    rolloutsExcluded: excludedCount,
    sequences: report.sequences,
    trainedTokens: report.tokens.trained,
    meanReward: report.rewards?.mean ?? null,
    mergeMode: report.merge.mode,
    mergeRate: report.mergeRate,
    driftRate: report.drift.rate,
    ...(report.staleness && { keptByVersionsBehind: report.staleness.keptByVersionsBehind }),
  };
}
