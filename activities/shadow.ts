import { Context } from '@temporalio/activity';
import type { ArtifactStore } from '../src/artifacts/artifact-store.js';
import { GatewayRequestError, type GatewayControlClient } from '../src/gateway/control-client.js';
import type { Mirror } from '../src/gateway/routing.js';
import { selectionRolloutIds } from '../src/rollouts/rollout-id.js';
import { shadowReport } from '../src/shadow/report.js';
import type { TraceStore } from '../src/store/trace-store.js';
import { ShadowSetupFailure } from '../workflows/failures.js';

export interface ShadowActivityDeps {
  store: TraceStore;
  artifacts: ArtifactStore;
  /** Absent when the worker's config names no gateway admin key: mirrors cannot be set there. */
  gateway?: GatewayControlClient;
}

export interface ShadowReportInput {
  candidate: string;
  batchId: string;
  taskIds: string[];
  samplesPerTask: number;
}

/** Small enough for workflow history; the whole report (examples, splits by outcome) is the artifact. */
export interface ShadowReportSummary {
  uri: string;
  sha256: string;
  candidate: string;
  incumbents: string[];
  rollouts: number;
  mirrored: number;
  executionFailures: number;
  completed: number;
  compared: number;
  disagreed: number;
  disagreementRate: number | null;
}

/** How long stopping a mirror waits for the shadow calls already sent (they time out on the gateway's own limits). */
const DRAIN_TIMEOUT_MS = 60_000;

export function createShadowActivities(deps: ShadowActivityDeps) {
  const gatewayOrFail = () => {
    if (!deps.gateway) {
      throw new ShadowSetupFailure(
        'this worker cannot set gateway mirrors: its config gives no gateway admin key (set REIN_GATEWAY_ADMIN_KEY, or run it where the gateway wrote dataDir/gateway/admin-key)',
      );
    }
    return deps.gateway;
  };
  return {
    /** Mirrors the alias's calls to the candidate; never takes over a mirror already set (mirrorToCandidate). */
    async startMirror(input: { alias: string; candidate: string }): Promise<Mirror> {
      return mirrorToCandidate(gatewayOrFail(), input);
    },

    /** Stops mirroring the alias and waits for the candidate's shadow calls in flight (stopMirroring). */
    async stopMirror(input: {
      alias: string;
      candidate?: string;
    }): Promise<{ removed: Mirror | null; drained: boolean }> {
      return stopMirroring(gatewayOrFail(), input);
    },

    /** The shadow report over exactly the set's rollouts, kept as an artifact; history gets the counts. */
    async shadowReport(input: ShadowReportInput): Promise<ShadowReportSummary> {
      return storeShadowReport(deps, input);
    },
  };
}

/**
 * Mirrors the alias's calls to the candidate. An alias mirrored already is refused rather than
 * taken over, so a shadow run never ends someone's live mirror; only a retry of this activity
 * may find its own mirror in place (its first attempt set it, then its answer was lost).
 */
async function mirrorToCandidate(
  gateway: GatewayControlClient,
  input: { alias: string; candidate: string },
): Promise<Mirror> {
  const existing = (await gateway.listMirrors()).find((m) => m.alias === input.alias);
  if (existing && !(existing.candidate === input.candidate && Context.current().info.attempt > 1)) {
    throw new ShadowSetupFailure(
      `alias ${input.alias} is mirrored to ${existing.candidate} already; stop that mirror first (\`rein shadow stop --alias ${input.alias}\`)`,
    );
  }
  try {
    return await gateway.setMirror(input.alias, input.candidate);
  } catch (err) {
    if (err instanceof GatewayRequestError && err.code === 'policy_not_found') {
      throw new ShadowSetupFailure(
        `the gateway does not serve ${input.candidate}, so nothing can be mirrored to it (${err.message}). ` +
          `Serve it first: on the embedded default, register its checkpoint folder (\`rein register ${input.candidate} --checkpoint DIR\`) and restart \`rein dev\`; ` +
          `with your own backend, add it to gateway.policies or PUT /api/policies/${input.candidate}`,
      );
    }
    if (err instanceof GatewayRequestError && err.status === 404) throw new ShadowSetupFailure(err.message);
    throw err;
  }
}

/**
 * Stops mirroring the alias (a mirror already gone is fine) and, given the candidate, waits
 * for the shadow calls already sent to it, so a report made next counts them all. A mirror
 * moved to another candidate meanwhile is someone else's and stays.
 */
async function stopMirroring(
  gateway: GatewayControlClient,
  input: { alias: string; candidate?: string },
): Promise<{ removed: Mirror | null; drained: boolean }> {
  const current = (await gateway.listMirrors()).find((m) => m.alias === input.alias);
  let removed: Mirror | null = null;
  if (current && (input.candidate === undefined || current.candidate === input.candidate)) {
    try {
      removed = await gateway.clearMirror(input.alias);
    } catch (err) {
      // Cleared by someone else between the two requests: what this activity is for happened.
      if (!(err instanceof GatewayRequestError && err.code === 'mirror_not_found')) throw err;
    }
  }
  if (input.candidate === undefined) return { removed, drained: true };
  try {
    return { removed, drained: (await gateway.drainPolicy(input.candidate, DRAIN_TIMEOUT_MS)).drained };
  } catch (err) {
    // A candidate no longer routed has nothing in flight.
    if (err instanceof GatewayRequestError && err.status === 404) return { removed, drained: true };
    throw err;
  }
}

/** The shadow report over exactly the set's rollouts, stored as an artifact, and its counts. */
async function storeShadowReport(deps: ShadowActivityDeps, input: ShadowReportInput): Promise<ShadowReportSummary> {
  const rolloutIds = selectionRolloutIds(input);
  const report = await shadowReport(deps.store, { candidate: input.candidate, rolloutIds });
  const stored = await deps.artifacts.put(
    `shadow/${input.batchId}/shadow-report.json`,
    `${JSON.stringify(report, null, 2)}\n`,
  );
  return {
    uri: stored.uri,
    sha256: stored.sha256,
    candidate: report.candidate,
    incumbents: report.incumbents,
    rollouts: report.rollouts,
    mirrored: report.mirrored,
    executionFailures: report.executionFailures.total,
    completed: report.completed,
    compared: report.compared,
    disagreed: report.compared - report.actions.same,
    disagreementRate: report.disagreementRate,
  };
}
