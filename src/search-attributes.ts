/**
 * Rein's custom search attributes, so runs can be filtered in the Temporal UI and with
 * `temporal workflow list --query`. Registered by `rein server`/`rein dev` (or by hand on a
 * server Rein may not administer); workflows upsert them as stages complete.
 */
export const REIN_SEARCH_ATTRIBUTES = {
  ReinRunId: 'Keyword',
  ReinIteration: 'Int',
  ReinStage: 'Keyword',
  ReinPolicyVersion: 'Keyword',
  ReinMeanReward: 'Double',
  ReinVerdict: 'Keyword',
  /**
   * Held-out success (share of held-out tasks accepted): the candidate's on an iteration or release, production's on a
   * run.
   */
  ReinHeldoutSuccess: 'Double',
} as const satisfies Record<string, SearchAttributeKind>;

export type SearchAttributeKind = 'Keyword' | 'Int' | 'Double' | 'Bool' | 'Datetime' | 'Text' | 'KeywordList';
export type ReinSearchAttributeName = keyof typeof REIN_SEARCH_ATTRIBUTES;
