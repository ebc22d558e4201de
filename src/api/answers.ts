import type { z } from 'zod';
import type * as cs from './console-schemas.js';
import type * as s from './schemas.js';

/**
 * The API's answers as a client (the console's pages) receives them, from the routes' response
 * schemas: one source for the server's types, the OpenAPI document and its clients.
 */

/** A value as JSON carries it: the times the server holds as Dates arrive as ISO 8601 text. */
export type Json<T> = T extends Date
  ? string
  : T extends readonly (infer Item)[]
    ? Json<Item>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

/** What a route with this response schema answers, as JSON. */
export type Answer<Schema extends z.ZodType> = Json<z.output<Schema>>;

export type RunListing = Answer<typeof s.runListing>;
export type RunReport = Answer<typeof s.runReport>;
export type Gate = Answer<typeof s.iterationGate>;
export type PolicyRecord = Answer<typeof s.policyRecord>;
export type AliasChange = Answer<typeof s.aliases>['history'][number];
export type Aliases = Answer<typeof s.aliases>;
export type Decision = Answer<typeof s.decision>;
export type LedgerEntry = Answer<typeof s.ledgerEntry>;
export type ScheduleListing = Answer<typeof s.scheduleListing>;
export type IterationView = Answer<typeof cs.iterationView>;
export type RunView = Answer<typeof cs.runView>;
export type DecisionPair = Answer<typeof cs.decisionPair>;
export type PairSide = DecisionPair['candidate'];
export type RolloutView = Answer<typeof cs.rolloutView>;
export type Call = Answer<typeof cs.callView>;
export type RolloutEvent = Answer<typeof cs.rolloutEvent>;
export type RunRolloutRow = Answer<typeof cs.runRolloutRow>;
export type RunRolloutsPage = Answer<typeof cs.runRolloutsPage>;
export type RunConfigView = Answer<typeof cs.runConfigView>;
export type RolloutTokens = Answer<typeof cs.rolloutTokens>;
export type UpdateLog = Answer<typeof cs.updateLog>;
export type TokenRow = RolloutTokens['sequences'][number]['tokens'][number];
/** The lists' envelope: `{ items: [...] }`. */
export interface Items<T> {
  items: T[];
}
