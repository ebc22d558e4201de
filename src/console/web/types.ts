/**
 * The API's answers as the pages read them: derived from the API's response schemas
 * (src/api/answers.ts), the same ones /openapi.json is built from. Type-only: nothing of the
 * server is bundled.
 */
export type {
  AliasChange,
  Aliases,
  Call,
  Decision,
  DecisionPair,
  Gate,
  IterationView,
  Items,
  LedgerEntry,
  PairSide,
  RolloutEvent,
  RolloutTokens,
  RolloutView,
  RunListing,
  RunConfigView,
  RunReport,
  RunRolloutRow,
  RunRolloutsPage,
  RunView,
  TokenRow,
  UpdateLog,
} from '../../api/answers.js';
