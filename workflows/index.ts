export { preflight, type PreflightResult } from './preflight.js';
export { rolloutSet, type RolloutSetInput } from './rollout-set.js';
