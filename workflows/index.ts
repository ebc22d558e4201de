export { preflight, type PreflightResult } from './preflight.js';
export { rolloutSet, type RolloutSetInput } from './rollout-set.js';
export { SHARDS_MEMO, type ShardedProgress } from './rollout-shards.js';
export {
  STAGES_MEMO,
  trainingIteration,
  type IterationStage,
  type TrainingIterationInput,
  type TrainingIterationResult,
} from './training-iteration.js';
export {
  pauseSignal,
  resumeSignal,
  statusQuery,
  stopSignal,
  trainingRun,
  type ClosedRunState,
  type RunStatus,
  type TrainingRunInput,
} from './training-run.js';
export { PROGRESS_MEMO, type HeldoutResult, type RunProgress } from './run-progress.js';
export { releaseCandidate, type ReleaseCandidateInput, type ReleaseCandidateResult } from './release-candidate.js';
export { shadowRun, type ShadowRunInput, type ShadowRunResult } from './shadow-run.js';
