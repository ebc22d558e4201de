import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { REIN_SEARCH_ATTRIBUTES, type SearchAttributeKind } from '../src/search-attributes.js';

const TYPES = {
  Keyword: SearchAttributeType.KEYWORD,
  Int: SearchAttributeType.INT,
  Double: SearchAttributeType.DOUBLE,
  Bool: SearchAttributeType.BOOL,
  Datetime: SearchAttributeType.DATETIME,
  Text: SearchAttributeType.TEXT,
  KeywordList: SearchAttributeType.KEYWORD_LIST,
} as const satisfies Record<SearchAttributeKind, SearchAttributeType>;

function key<N extends keyof typeof REIN_SEARCH_ATTRIBUTES>(name: N) {
  return defineSearchAttributeKey(name, TYPES[REIN_SEARCH_ATTRIBUTES[name]]);
}

export const ReinStage = key('ReinStage');
export const ReinRunId = key('ReinRunId');
export const ReinIteration = key('ReinIteration');
export const ReinPolicyVersion = key('ReinPolicyVersion');
export const ReinMeanReward = key('ReinMeanReward');
export const ReinVerdict = key('ReinVerdict');
export const ReinHeldoutSuccess = key('ReinHeldoutSuccess');
