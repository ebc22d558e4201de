import { closeSync, existsSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import path from 'node:path';
import type { GatewayControlClient } from '../gateway/control-client.js';
import { recordedRewards } from '../rollouts/rewards.js';
import { ROLLOUT_ID_PATTERN } from '../rollouts/rollout-id.js';
import type { Rollout, RolloutEvent } from '../rollouts/rollout.js';
import type { CallRecord } from '../store/trace-store.js';

/** The end of a log is where a failure shows; more is on disk. */
const LOG_TAIL_BYTES = 64 * 1024;

/** A call as the console shows it: the journaled request and response (redacted as stored), without the token-id arrays. */
export type CallView = Omit<CallRecord, 'promptIds' | 'choices'> & { promptTokens: number | null; completionTokens: number | null };

export interface RolloutView {
  rollout: Rollout;
  calls: CallView[];
  events: RolloutEvent[];
  rewards: { verified: number | null; reported: number | null; disagrees: boolean };
  /** The harness's and verifier's logs from the rollout's folder on this machine (the ends of them). */
  logs: Array<{ name: string; text: string; truncatedBytes: number }>;
}

/** A rollout with its calls, events and logs: read from the gateway's journal and the rollout's folder under the data directory. */
export async function rolloutView(gateway: GatewayControlClient, dataDir: string, rolloutId: string): Promise<RolloutView> {
  const [rollout, calls, events] = await Promise.all([gateway.getRollout(rolloutId), gateway.listCalls(rolloutId), gateway.listEvents(rolloutId)]);
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
    logs: rolloutLogs(dataDir, rolloutId),
  };
}

/** The harness's logs (one per attempt) and the verifier's, from `<dataDir>/rollouts/<rolloutId>/`. */
export function rolloutLogs(dataDir: string, rolloutId: string): RolloutView['logs'] {
  // The id names a folder: only ids the gateway could have issued (no separators) are looked up.
  if (!ROLLOUT_ID_PATTERN.test(rolloutId)) return [];
  const dir = path.join(dataDir, 'rollouts', rolloutId);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => /^harness-\d+\.log$|^verifier\.log$/.test(name))
    .sort((a, b) => logOrder(a) - logOrder(b))
    .map((name) => ({ name, ...tail(path.join(dir, name)) }));
}

const logOrder = (name: string) => (name === 'verifier.log' ? Number.MAX_SAFE_INTEGER : Number(/\d+/.exec(name)?.[0] ?? 0));

function tail(file: string): { text: string; truncatedBytes: number } {
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
