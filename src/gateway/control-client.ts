import { request as undiciRequest, type Dispatcher } from 'undici';
import type {
  CallRecord,
  ListedRollout,
  Page,
  RolloutFilter,
  ShadowCallFilter,
  ShadowCallRecord,
} from '../store/trace-store.js';
import type { NewEventInput, NewRollout, Rollout, RolloutEvent, StatusChange } from '../rollouts/rollout.js';
import {
  controlRoutes as api,
  controlUrl,
  type ControlInput,
  type ControlOutput,
  type ControlRoute,
  type IssuedRollout,
  type PolicyStatus,
} from './control-api.js';
import type { Mirror, PolicySpec } from './routing.js';

export type { IssuedRollout } from './control-api.js';

export class GatewayRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'GatewayRequestError';
  }
}

/**
 * The gateway's control API over HTTP (its routes: control-api.ts), as the rollout runner and the control plane use it.
 */
export class GatewayControlClient {
  /** @param adminKey the key, or where to read it when a request is made (it may not exist yet). */
  constructor(
    readonly url: string,
    private readonly adminKey: string | (() => string),
  ) {}

  /** A key the rollout's verifier may use to read its calls and events (and nothing else). */
  async verifierKey(id: string): Promise<string> {
    return (await this.call(api.verifierKey, { params: { id } })).key;
  }

  createRollout(input: NewRollout & { id: string }): Promise<IssuedRollout> {
    return this.call(api.createRollout, { body: input });
  }

  getRollout(id: string): Promise<Rollout> {
    return this.call(api.getRollout, { params: { id } });
  }

  /** Rollouts newest first, filtered, with their verifier rewards (see TraceStore.listRollouts). */
  listRollouts(filter: RolloutFilter = {}): Promise<Page<ListedRollout>> {
    return this.call(api.listRollouts, { query: filter });
  }

  startAttempt(id: string): Promise<IssuedRollout> {
    return this.call(api.startAttempt, { params: { id } });
  }

  /** A new attempt for a rollout that finished unscored (see TraceStore.reopenRollout). */
  reopenRollout(id: string, reason: string): Promise<IssuedRollout> {
    return this.call(api.reopenRollout, { params: { id }, body: { reason } });
  }

  setStatus(id: string, change: StatusChange): Promise<Rollout> {
    return this.call(api.setRolloutStatus, { params: { id }, body: change });
  }

  /** `attempt`: the attempt the event belongs to, refused (409) if superseded; by default the current one. */
  appendEvent(id: string, event: NewEventInput, attempt?: number): Promise<RolloutEvent> {
    return this.call(api.appendEvent, { params: { id }, query: { attempt }, body: event });
  }

  async listEvents(id: string): Promise<RolloutEvent[]> {
    return (await this.call(api.listEvents, { params: { id } })).items;
  }

  async listCalls(id: string, attempt?: number): Promise<CallRecord[]> {
    return (await this.call(api.listCalls, { params: { id }, query: { attempt } })).items;
  }

  /** Resolves when the gateway answers. */
  async health(): Promise<void> {
    await this.call(api.health, {});
  }

  /**
   * Whether calls pinned to the version would reach a backend now (see the gateway's /ready route); 404 when it is not
   * routed.
   */
  policyReady(version: string): Promise<{ ready: boolean; problems: string[] }> {
    return this.call(api.policyReady, { params: { version } });
  }

  registerPolicy(version: string, spec: PolicySpec): Promise<PolicyStatus> {
    return this.call(api.registerPolicy, { params: { version }, body: spec });
  }

  setAlias(alias: string, policyVersion: string): Promise<{ alias: string; policyVersion: string }> {
    return this.call(api.setAlias, { params: { alias }, body: { policyVersion } });
  }

  /** Waits (at most timeoutMs) until no call of the version is in flight, shadow calls to it included. */
  drainPolicy(version: string, timeoutMs: number): Promise<PolicyStatus & { drained: boolean }> {
    return this.call(api.drainPolicy, { params: { version }, query: { timeoutMs } });
  }

  /** Mirrors the alias's production calls to the candidate version (see Router.setMirror). */
  setMirror(alias: string, candidate: string, sampleRate = 1): Promise<Mirror> {
    return this.call(api.setMirror, { params: { alias }, body: { candidate, sampleRate } });
  }

  clearMirror(alias: string): Promise<Mirror> {
    return this.call(api.clearMirror, { params: { alias } });
  }

  async listMirrors(): Promise<Mirror[]> {
    return (await this.call(api.listMirrors, {})).items;
  }

  /** One page (at most `limit`, default 100, at most 500); pass `next` as `after` for the following one. */
  listShadowCalls(filter: ShadowCallFilter = {}): Promise<Page<ShadowCallRecord>> {
    return this.call(api.listShadowCalls, { query: filter });
  }

  /** A lease on one of `limit` launch slots of a harness kind, across workers (leaseId null: all taken). */
  takeLaunchSlot(request: {
    kind: string;
    holder: string;
    limit: number;
    ttlMs: number;
  }): Promise<{ leaseId: string | null; running: number }> {
    return this.call(api.takeLaunchSlot, { body: request });
  }

  async renewLaunchSlot(leaseId: string, ttlMs: number): Promise<boolean> {
    return (await this.call(api.renewLaunchSlot, { params: { id: leaseId }, body: { ttlMs } })).renewed;
  }

  async releaseLaunchSlot(leaseId: string): Promise<boolean> {
    return (await this.call(api.releaseLaunchSlot, { params: { id: leaseId } })).released;
  }

  /** One request of the control API, its path, query and body made from the route's own definition. */
  private async call<R extends ControlRoute>(route: R, input: ControlInput<R>): Promise<ControlOutput<R>> {
    const { params, query, body } = input as { params?: Record<string, string>; query?: object; body?: unknown };
    return (await this.request(route.method, controlUrl(route, params, query), body)) as ControlOutput<R>;
  }

  /**
   * undici's request rather than fetch: a runner makes ~6 of these per rollout, and fetch's WHATWG
   * streams and headers cost several times the CPU for the same keep-alive HTTP/1.1 exchange.
   */
  private async request(method: string, route: string, body?: unknown): Promise<unknown> {
    const key = typeof this.adminKey === 'string' ? this.adminKey : this.adminKey();
    let reply: Dispatcher.ResponseData;
    try {
      reply = await undiciRequest(`${this.url}${route}`, {
        method: method as Dispatcher.HttpMethod,
        headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new GatewayRequestError(
        0,
        'gateway_unreachable',
        `the gateway at ${this.url} is unreachable (${(err as Error).message}); is \`rein gateway\` running?`,
      );
    }
    const status = reply.statusCode;
    const text = await reply.body.text();
    const parsed = text ? (JSON.parse(text) as unknown) : undefined;
    if (status < 200 || status >= 300) {
      const error = (parsed as { error?: { message?: string; code?: string } } | undefined)?.error;
      throw new GatewayRequestError(
        status,
        error?.code ?? 'error',
        `${method} ${route}: ${status} ${error?.message ?? text}`,
      );
    }
    return parsed;
  }
}
