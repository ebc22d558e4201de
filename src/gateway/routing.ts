import { createHash } from 'node:crypto';
import {
  own,
  RoutingError,
  servedNames,
  validateTable,
  type BackendSpec,
  type PolicySpec,
  type RoutingTable,
} from './routing-table.js';

export {
  aliasesNamedLikeVersions,
  ROUTING_NAME_MAX_LENGTH,
  ROUTING_NAME_PATTERN,
  routingNameProblem,
} from './routing-names.js';
export { RoutingError } from './routing-table.js';
export type { BackendSpec, PolicySpec, RoutingTable, TokenInSpec } from './routing-table.js';

export interface Route {
  policyVersion: string;
  model: string;
  backendName: string;
  backend: BackendSpec;
  endpoint: string;
}

/** A mirrored call's route to the candidate; release() runs when the shadow call ends. */
export interface MirrorRoute extends Route {
  release: () => void;
}

export interface Mirror {
  alias: string;
  /** The version the alias serves now. */
  incumbent: string;
  candidate: string;
  /**
   * The share of rollouts mirrored (all calls of a sampled rollout are), so a busy production does not double the
   * candidate's load.
   */
  sampleRate: number;
}

/** The version a call is served by, and the alias it reached it through (mirrors follow aliases). */
interface ServedName {
  policyVersion: string;
  alias?: string;
}

interface PolicyState {
  paused: boolean;
  inFlight: number;
  drained: Array<() => void>;
}

/**
 * Maps the model a harness asks for to a policy version and a backend endpoint, keeps each
 * rollout on one endpoint, and lets a policy be paused (new calls get 429) and drained (wait
 * until its in-flight calls finish) around a weight update.
 */
export class Router {
  private readonly state = new Map<string, PolicyState>();

  constructor(
    private table: RoutingTable,
    private readonly retryAfterSeconds = 5,
  ) {
    validateTable(table);
  }

  /**
   * Replaces the table, e.g. after an alias moved; in-flight counts and pauses carry over, mirrors are the new table's.
   */
  update(table: RoutingTable): void {
    validateTable(table);
    this.table = table;
  }

  /** Adds or replaces where a policy version is served (e.g. a freshly trained version). */
  registerPolicy(policyVersion: string, spec: PolicySpec): void {
    this.update({ ...this.table, policies: { ...this.table.policies, [policyVersion]: spec } });
  }

  /** Points an alias at a policy version; calls already admitted finish on the old one. */
  setAlias(alias: string, policyVersion: string): void {
    this.requirePolicy(policyVersion);
    this.update({ ...this.table, aliases: { ...this.table.aliases, [alias]: policyVersion } });
  }

  /**
   * Mirrors an alias's calls to a candidate version (replacing any earlier candidate). Only calls
   * that reach their policy through the alias and whose rollout is not pinned are mirrored: pinned
   * rollouts are Rein's own training and evaluation traffic, not production's.
   */
  setMirror(alias: string, candidateVersion: string, sampleRate = 1): Mirror {
    if (!(sampleRate > 0 && sampleRate <= 1))
      throw new RoutingError(`sampleRate must be in (0, 1], got ${sampleRate}`, 400, 'invalid_sample_rate');
    if (!Object.hasOwn(this.table.aliases, alias)) {
      const known = Object.keys(this.table.aliases).join(', ') || '(none)';
      throw new RoutingError(
        `alias ${alias} does not exist, so there is nothing to mirror; known aliases: ${known} (create one with PUT /api/aliases/${alias})`,
        404,
        'alias_not_found',
      );
    }
    if (!Object.hasOwn(this.table.policies, candidateVersion)) {
      throw new RoutingError(
        `candidate policy ${candidateVersion} is not in the routing table; register it first (PUT /api/policies/${candidateVersion})`,
        404,
        'policy_not_found',
      );
    }
    this.update({
      ...this.table,
      mirrors: { ...this.table.mirrors, [alias]: { candidate: candidateVersion, sampleRate } },
    });
    return this.mirrorOf(alias) as Mirror;
  }

  /** Stops mirroring an alias; shadow calls already sent finish. Returns the mirror removed, if any. */
  clearMirror(alias: string): Mirror | undefined {
    const removed = this.mirrorOf(alias);
    if (!removed) return undefined;
    const { [alias]: _removed, ...mirrors } = this.table.mirrors ?? {};
    this.update({ ...this.table, mirrors });
    return removed;
  }

  mirrors(): Mirror[] {
    return Object.keys(this.table.mirrors ?? {}).map((alias) => this.mirrorOf(alias) as Mirror);
  }

  models(): Array<{ id: string; policyVersion: string }> {
    return [
      ...Object.entries(this.table.aliases).map(([id, policyVersion]) => ({ id, policyVersion })),
      ...Object.keys(this.table.policies).map((id) => ({ id, policyVersion: id })),
    ];
  }

  /**
   * Resolves and admits a call: the returned release() must run when the call ends. A call of a
   * mirrored alias from an unpinned rollout also gets `mirror`, the candidate's route, unless the
   * candidate is paused: a shadow is skipped rather than ever holding up production. A shadow
   * call counts as in flight on the candidate (so draining it waits for shadows too) until
   * mirror.release() runs.
   */
  admit(
    model: unknown,
    rolloutId: string,
    pinnedVersion?: string,
  ): { route: Route; release: () => void; mirror?: MirrorRoute } {
    // As vLLM serves a request without a model with its one model: the rollout's pinned version, else production.
    if (model === undefined || model === null)
      model = pinnedVersion ?? (Object.hasOwn(this.table.aliases, 'production') ? 'production' : undefined);
    if (typeof model !== 'string' || model === '') {
      throw new RoutingError(
        'the request names no model; set "model" to a policy alias or version',
        400,
        'model_missing',
      );
    }
    // A rollout Rein pinned to a version (training, held-out replay) gets it whatever name its harness uses: many
    // harnesses hard-code a vendor's model name.
    const served: ServedName =
      pinnedVersion === undefined ? this.resolveServed(model) : { policyVersion: pinnedVersion };
    const { policyVersion } = served;
    if (!Object.hasOwn(this.table.policies, policyVersion)) {
      throw new RoutingError(
        `the rollout is pinned to policy ${policyVersion}, which is not in the routing table; register it first (PUT /api/policies/${policyVersion})`,
        503,
        'pinned_policy_missing',
      );
    }
    if (this.stateOf(policyVersion).paused) {
      throw new RoutingError(
        `policy ${policyVersion} is paused for a weight update; retry shortly`,
        429,
        'policy_paused',
        this.retryAfterSeconds,
      );
    }
    const { route, release } = this.enter(policyVersion, rolloutId);
    const mirror = served.alias === undefined ? undefined : this.mirrorOf(served.alias);
    const candidate = mirror && sampled(rolloutId, mirror.sampleRate) ? mirror.candidate : undefined;
    if (candidate === undefined || this.stateOf(candidate).paused) return { route, release };
    const shadow = this.enter(candidate, rolloutId);
    return { route, release, mirror: { ...shadow.route, release: shadow.release } };
  }

  /**
   * The version an unpinned call's model name reaches, and the alias it went through: the name itself, else
   * gateway.defaultModel; neither known is a 404 that lists the names served.
   */
  private resolveServed(model: string): ServedName {
    for (const name of [model, this.table.defaultModel]) {
      if (name === undefined) continue;
      // Own properties only: a model named "constructor" is unknown, not Object's.
      const aliased = own(this.table.aliases, name);
      if (aliased !== undefined) return { policyVersion: aliased, alias: name };
      if (Object.hasOwn(this.table.policies, name)) return { policyVersion: name };
    }
    throw new RoutingError(
      `The model \`${model}\` does not exist. ${servedNames(this.table)}` +
        (this.table.defaultModel === undefined
          ? '; gateway.defaultModel (an alias such as production) would serve any other name'
          : `; gateway.defaultModel ${this.table.defaultModel} is not served either`),
      404,
      'model_not_found',
    );
  }

  pause(policyVersion: string): void {
    this.requirePolicy(policyVersion);
    this.stateOf(policyVersion).paused = true;
  }

  resume(policyVersion: string): void {
    this.requirePolicy(policyVersion);
    this.stateOf(policyVersion).paused = false;
  }

  /** Resolves once no call of the policy is in flight (pause first, or new calls keep it busy). */
  drain(policyVersion: string): Promise<void> {
    this.requirePolicy(policyVersion);
    const state = this.stateOf(policyVersion);
    if (state.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => state.drained.push(resolve));
  }

  status(): Array<{
    policyVersion: string;
    model: string;
    backend: string;
    paused: boolean;
    inFlight: number;
    aliases: string[];
  }> {
    return Object.entries(this.table.policies).map(([policyVersion, policy]) => {
      const state = this.stateOf(policyVersion);
      return {
        policyVersion,
        model: policy.model,
        backend: policy.backend,
        paused: state.paused,
        inFlight: state.inFlight,
        aliases: Object.entries(this.table.aliases)
          .filter(([, v]) => v === policyVersion)
          .map(([alias]) => alias),
      };
    });
  }

  /** Where a version's calls go, one route per backend endpoint; undefined when the table lacks it. */
  routesOf(policyVersion: string): Route[] | undefined {
    const policy = own(this.table.policies, policyVersion);
    if (!policy) return undefined;
    const backend = own(this.table.backends, policy.backend) as BackendSpec;
    return backend.endpoints.map((endpoint) => ({
      policyVersion,
      model: policy.model,
      backendName: policy.backend,
      backend,
      endpoint,
    }));
  }

  /** Counts a call in flight on a policy (known to be in the table) and routes it. */
  private enter(policyVersion: string, rolloutId: string): { route: Route; release: () => void } {
    const policy = own(this.table.policies, policyVersion) as PolicySpec;
    const backend = own(this.table.backends, policy.backend) as BackendSpec;
    const state = this.stateOf(policyVersion);
    state.inFlight++;
    let released = false;
    return {
      route: {
        policyVersion,
        model: policy.model,
        backendName: policy.backend,
        backend,
        endpoint: stickyEndpoint(backend.endpoints, rolloutId),
      },
      release: () => {
        if (released) return;
        released = true;
        state.inFlight--;
        if (state.inFlight === 0) state.drained.splice(0).forEach((resolve) => resolve());
      },
    };
  }

  private mirrorOf(alias: string): Mirror | undefined {
    const mirror = own(this.table.mirrors, alias);
    if (!mirror) return undefined;
    return {
      alias,
      incumbent: own(this.table.aliases, alias) as string,
      candidate: mirror.candidate,
      sampleRate: mirror.sampleRate,
    };
  }

  private requirePolicy(policyVersion: string): void {
    if (!own(this.table.policies, policyVersion)) {
      throw new RoutingError(`policy ${policyVersion} is not in the routing table`, 404, 'policy_not_found');
    }
  }

  private stateOf(policyVersion: string): PolicyState {
    let state = this.state.get(policyVersion);
    if (!state) this.state.set(policyVersion, (state = { paused: false, inFlight: 0, drained: [] }));
    return state;
  }
}

/** Whether a rollout is in a mirror's sample: decided by its id, so a sampled rollout is mirrored whole. */
export function sampled(rolloutId: string, rate: number): boolean {
  if (rate >= 1) return true;
  return createHash('sha256').update(`mirror:${rolloutId}`).digest().readUInt32BE(0) / 2 ** 32 < rate;
}

/** The same rollout always lands on the same endpoint (its KV cache lives there). */
export function stickyEndpoint(endpoints: readonly string[], rolloutId: string): string {
  if (endpoints.length === 1) return endpoints[0] as string;
  const bucket = createHash('sha256').update(rolloutId).digest().readUInt32BE(0) % endpoints.length;
  return endpoints[bucket] as string;
}
