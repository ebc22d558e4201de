/** A rollout's statuses and modes: data only, no imports, so the console's pages bundle them too. */
export const ROLLOUT_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type RolloutStatus = (typeof ROLLOUT_STATUSES)[number];

// rigger: the rigger's own LLM calls (environment.rigger.llm), journaled like a harness's.
export const ROLLOUT_MODES = ['train', 'eval', 'shadow', 'rigger'] as const;
export type RolloutMode = (typeof ROLLOUT_MODES)[number];
