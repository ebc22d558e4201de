import { closeSync, existsSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import path from 'node:path';
import type { ArtifactStore } from '../artifacts/artifact-store.js';
import type { GatewayControlClient } from '../gateway/control-client.js';
import type { StoredDecision } from '../registry/policy-registry.js';
import { recordedRewards } from '../rollouts/rewards.js';
import {
  LOG_NOT_UPLOADED_EVENT,
  logOrder,
  ROLLOUT_LOG_FILE,
  rolloutLogsPrefix,
  uploadedLogText,
} from '../rollouts/rollout-logs.js';
import { ROLLOUT_ID_PATTERN } from '../rollouts/rollout-id.js';
import type { Rollout, RolloutEvent } from '../rollouts/rollout.js';
import type { CallRecord } from '../store/trace-store.js';
import { decisionReplays } from './decision-pairs.js';

/** The end of a log is where a failure shows; more is on disk. */
const LOG_TAIL_BYTES = 64 * 1024;

/**
 * A call as the console shows it: the journaled request and response (redacted as stored), without the token-id arrays.
 */
export type CallView = Omit<CallRecord, 'promptIds' | 'choices'> & {
  promptTokens: number | null;
  completionTokens: number | null;
};

export interface RolloutView {
  rollout: Rollout;
  calls: CallView[];
  events: RolloutEvent[];
  rewards: { verified: number | null; reported: number | null; disagrees: boolean };
  /** Whether the verifier's reward reached the gate's acceptReward (null: not scored), and that threshold. */
  outcome: { accepted: boolean | null; acceptReward: number };
  /** The run and iteration a training rollout belongs to (its batch `<run>.it<n>`); null for others. */
  trainedIn: { runId: string; iteration: number } | null;
  /** For a held-out replay's rollout: the gate decisions it is evidence in, and on which side. */
  decidedIn: Array<{ decisionId: string; side: 'candidate' | 'incumbent'; verdict: string }>;
  /** The ends of the harness's and verifier's logs, and where each was read (or why it could not be). */
  logs: LogView[];
  /** Why uploaded logs could not be read (the artifact store down or refusing); null when they could. */
  logsProblem: string | null;
}

export interface LogView {
  name: string;
  text: string;
  /** Bytes before `text` that are not shown (cut on upload, or before the tail). */
  truncatedBytes: number;
  /**
   * `artifacts`: uploaded by the worker; `local`: only in this machine's data directory; `missing`: neither, `note`
   * says why.
   */
  source: 'artifacts' | 'local' | 'missing';
  note?: string;
}

/**
 * Where the API finds logs: the artifact store the workers upload to, and its own data directory (a worker beside it,
 * older rollouts).
 */
export interface LogSources {
  artifacts: ArtifactStore;
  dataDir: string;
}

/**
 * A rollout with its calls, events and logs: read from the gateway's journal and the artifact store (or this machine's
 * data directory).
 */
export async function rolloutView(
  gateway: GatewayControlClient,
  sources: LogSources,
  rolloutId: string,
  acceptReward: number,
  decisionsFor: DecisionsFor = async () => [],
): Promise<RolloutView> {
  const [rollout, calls, events] = await Promise.all([
    gateway.getRollout(rolloutId),
    gateway.listCalls(rolloutId),
    gateway.listEvents(rolloutId),
  ]);
  const decidedIn = await decisionsOfReplay(rollout, decisionsFor);
  const rewards = recordedRewards(events);
  return {
    rollout,
    calls: calls.map(({ promptIds, choices, ...call }) => ({
      ...call,
      promptTokens: promptIds?.length ?? null,
      completionTokens: choices ? choices.reduce((sum, c) => sum + (c.completionIds?.length ?? 0), 0) : null,
    })),
    events,
    rewards: { verified: rewards.verified ?? null, reported: rewards.reported ?? null, disagrees: rewards.disagrees },
    outcome: { accepted: rewards.verified === undefined ? null : rewards.verified >= acceptReward, acceptReward },
    trainedIn: rollout.mode === 'train' ? iterationOfBatch(rollout.metadata.batchId) : null,
    decidedIn,
    ...(await rolloutLogs(sources, rolloutId, events)),
  };
}

/** The registry's decisions about a version, as candidate or as the incumbent it was compared with. */
export type DecisionsFor = (version: string, side: 'candidate' | 'incumbent') => Promise<StoredDecision[]>;

/** The gate decisions a held-out replay's rollout is evidence in, on either side (later gates reuse a replay). */
async function decisionsOfReplay(rollout: Rollout, decisionsFor: DecisionsFor): Promise<RolloutView['decidedIn']> {
  const { batchId } = rollout.metadata;
  if (rollout.mode !== 'eval' || !rollout.policyVersion || typeof batchId !== 'string') return [];
  const found: RolloutView['decidedIn'] = [];
  for (const side of ['candidate', 'incumbent'] as const) {
    for (const decision of await decisionsFor(rollout.policyVersion, side))
      if (decisionReplays(decision)?.[side].batchId === batchId)
        found.push({ decisionId: decision.id, side, verdict: decision.verdict });
  }
  return found;
}

/** A training batch's run and iteration, from its id (`<run>.it<n>`, as training iterations name them). */
export function iterationOfBatch(batchId: unknown): { runId: string; iteration: number } | null {
  const match = typeof batchId === 'string' ? /^(.+)\.it(\d+)$/.exec(batchId) : null;
  return match ? { runId: match[1] as string, iteration: Number(match[2]) } : null;
}

/**
 * The harness's logs (one per attempt) and the verifier's: as uploaded to the artifact store
 * (`rollouts/<rolloutId>/`), else from `<dataDir>/rollouts/<rolloutId>/` on this machine (a
 * worker beside the API, rollouts from before uploads), else a note from the rollout's events
 * saying the worker could not upload it and where it stayed.
 */
export async function rolloutLogs(
  sources: LogSources,
  rolloutId: string,
  events: readonly RolloutEvent[] = [],
): Promise<Pick<RolloutView, 'logs' | 'logsProblem'>> {
  // The id names a folder and a prefix: only ids the gateway could have issued (no separators) are looked up.
  if (!ROLLOUT_ID_PATTERN.test(rolloutId)) return { logs: [], logsProblem: null };
  const logs = new Map<string, LogView>();
  let logsProblem: string | null = null;
  try {
    for (const uri of await sources.artifacts.list(rolloutLogsPrefix(rolloutId))) {
      const name = path.posix.basename(uri);
      if (!ROLLOUT_LOG_FILE.test(name)) continue;
      const { text, cutBytes } = uploadedLogText((await sources.artifacts.get(uri)).toString('utf8'));
      const shown = tailOfText(text);
      logs.set(name, { name, text: shown.text, truncatedBytes: cutBytes + shown.truncatedBytes, source: 'artifacts' });
    }
  } catch (err) {
    // The store down costs the page its uploaded logs, not the rest of it.
    logsProblem = `the artifact store ${sources.artifacts.url} could not be read: ${(err as Error).message}`;
  }
  const dir = path.join(sources.dataDir, 'rollouts', rolloutId);
  if (existsSync(dir)) {
    for (const name of readdirSync(dir)) {
      if (ROLLOUT_LOG_FILE.test(name) && !logs.has(name))
        logs.set(name, { name, ...tailOfFile(path.join(dir, name)), source: 'local' });
    }
  }
  // Only the worker (the admin key) records this; a harness's own event of that name is not believed.
  for (const event of events) {
    const data = event.payload.data as { file?: unknown; reason?: unknown; host?: unknown; path?: unknown } | undefined;
    if (
      event.type !== 'custom' ||
      event.source !== 'admin' ||
      event.payload.name !== LOG_NOT_UPLOADED_EVENT ||
      typeof data?.file !== 'string'
    )
      continue;
    if (!ROLLOUT_LOG_FILE.test(data.file) || logs.has(data.file)) continue;
    logs.set(data.file, {
      name: data.file,
      text: '',
      truncatedBytes: 0,
      source: 'missing',
      note: `not uploaded to the artifact store (${String(data.reason)}); it stays on the worker ${String(data.host)} at ${String(data.path)}`,
    });
  }
  return { logs: [...logs.values()].sort((a, b) => logOrder(a.name) - logOrder(b.name)), logsProblem };
}

/** The end of an uploaded log's text, cut at the same byte count as a local file's. */
function tailOfText(text: string): { text: string; truncatedBytes: number } {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= LOG_TAIL_BYTES) return { text, truncatedBytes: 0 };
  return {
    text: bytes.subarray(bytes.length - LOG_TAIL_BYTES).toString('utf8'),
    truncatedBytes: bytes.length - LOG_TAIL_BYTES,
  };
}

function tailOfFile(file: string): { text: string; truncatedBytes: number } {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, LOG_TAIL_BYTES);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return { text: buffer.toString('utf8'), truncatedBytes: size - length };
  } finally {
    closeSync(fd);
  }
}
