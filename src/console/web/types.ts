/** The API's answers as the pages read them (see /openapi.json for the whole shapes). */

export interface RunListing {
  runId: string;
  execution: string;
  startTime: string;
  closeTime?: string;
  stage?: string;
  policyVersion?: string;
}

export interface RunReport {
  runId: string;
  execution: string;
  startTime: string;
  closeTime?: string;
  problem?: string;
  status?: {
    state: string;
    stage: string;
    nextIteration: number;
    policyVersion: string;
    iterations: Array<{ iteration: number; candidate: string | null; meanReward: number | null; heldoutMeanReward: number | null; failed?: string; gate?: Gate }>;
    heldout?: { base: { policyVersion: string; meanReward: number | null }; latest: { policyVersion: string; meanReward: number | null } | null };
  };
  activity?: { stage?: string; type: string; done?: number; total?: number; lastFailure?: string; waiting?: string };
}

export interface Gate {
  verdict: string;
  decisionId: string;
  incumbent: string;
  promoted: boolean;
  reasons: string[];
}

export interface IterationView {
  iteration: number;
  candidate: string | null;
  execution: string | null;
  failed: string | null;
  meanReward: number | null;
  heldout: { candidate: number | null; production: number | null; lower: number | null; upper: number | null; incumbent: string | null; meanReward: number | null };
  trainer: Record<'loss' | 'approxKl' | 'clipFraction' | 'entropy' | 'gradNorm', number | null>;
  tokens: { rollouts: number | null; trained: number | null };
  stageSeconds: Record<string, number>;
  failures: { train: Record<string, number>; heldout: Record<string, number> };
  gate: Gate | null;
  workflows: Array<{ label: string; workflowId: string; executionRunId: string; url: string | null }>;
}

export interface RunView {
  runId: string;
  iterations: IterationView[];
  workflowUrl: string | null;
}

export interface Decision {
  id: string;
  candidate: string;
  incumbent: string;
  verdict: string;
  createdAt: string;
  record: {
    reasons?: string[];
    checks?: Array<{ name: string; passed: boolean; detail: string; rollouts: string[] }>;
    evidence?: Record<string, unknown>;
    rules?: Record<string, unknown>;
  };
}

export interface PairSide {
  rolloutId: string;
  status: string | null;
  reward: number | null;
  failureClass: string | null;
}

export interface DecisionPair {
  taskId: string;
  sample: number;
  incumbent: PairSide;
  candidate: PairSide;
  outcome: 'gained' | 'lost' | 'both' | 'neither' | 'unscored';
}

export interface RolloutEvent {
  id: number;
  attempt: number;
  type: string;
  source: string;
  actionId: string | null;
  payload: Record<string, unknown>;
  at: string;
}

export interface Call {
  id: string;
  seq: number;
  attempt: number;
  endpoint: string;
  policyVersion: string;
  status: string;
  stream: boolean;
  requestReceived: unknown;
  response?: unknown;
  errorClass?: string | null;
  errorMessage?: string | null;
  ttftMs?: number | null;
  latencyMs?: number;
  startedAt: number;
  promptTokens: number | null;
  completionTokens: number | null;
}

export interface RolloutView {
  rollout: { id: string; taskId: string | null; mode: string; status: string; statusReason: string | null; attempts: number; policyVersion: string | null; failureClass: string | null; metadata: Record<string, unknown>; createdAt: string; updatedAt: string };
  calls: Call[];
  events: RolloutEvent[];
  rewards: { verified: number | null; reported: number | null; disagrees: boolean };
  logs: Array<{ name: string; text: string; truncatedBytes: number; source: 'artifacts' | 'local' | 'missing'; note?: string }>;
  logsProblem: string | null;
}

export interface AliasChange {
  id: number;
  alias: string;
  from: string | null;
  to: string;
  operation: string;
  actor: string;
  reason: string | null;
  override: boolean;
  decisionId: string | null;
  at: string;
}

export interface LedgerEntry {
  id: string;
  kind: string;
  runId: string | null;
  iteration: number | null;
  decisionId: string | null;
  model: { policyVersion: string; parent: string | null };
  harness: { version: string };
  environment: { taskSet: string; verifier: string; config: string };
  metrics: { rollouts: number; acceptedRate: number; tokens: number; elapsedSeconds: number; toolErrors: number; retries: number; interventions: number; irreversibleFailures: number };
  at: string;
}
