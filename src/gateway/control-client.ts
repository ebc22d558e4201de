import type { CallRecord, Page, ShadowCallFilter, ShadowCallRecord } from '../store/trace-store.js';
import type { NewEventInput, NewRollout, Rollout, RolloutEvent, StatusChange } from '../rollouts/rollout.js';
import type { Mirror, PolicySpec } from './routing.js';

/** What creating a rollout (or a new attempt) returns: the credentials its harness gets. */
export interface IssuedRollout {
  rollout: Rollout;
  attempt: number;
  key: string;
  baseUrl: string;
  pathBaseUrl: string;
  /** W3C trace context of the attempt's trace, when the gateway exports traces: the harness gets it as TRACEPARENT. */
  traceparent?: string;
}

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

/** The gateway's control API over HTTP, as the rollout runner and the control plane use it. */
export class GatewayControlClient {
  /** @param adminKey the key, or where to read it when a request is made (it may not exist yet). */
  constructor(
    readonly url: string,
    private readonly adminKey: string | (() => string),
  ) {}

  /** A key the rollout's verifier may use to read its calls and events (and nothing else). */
  async verifierKey(id: string): Promise<string> {
    return (await this.request<{ key: string }>('POST', `/api/rollouts/${encodeURIComponent(id)}/verifier-key`)).key;
  }

  createRollout(input: NewRollout & { id: string }): Promise<IssuedRollout> {
    return this.request('POST', '/api/rollouts', input);
  }

  getRollout(id: string): Promise<Rollout> {
    return this.request('GET', `/api/rollouts/${encodeURIComponent(id)}`);
  }

  startAttempt(id: string): Promise<IssuedRollout> {
    return this.request('POST', `/api/rollouts/${encodeURIComponent(id)}/attempts`);
  }

  /** A new attempt for a rollout that finished unscored (see TraceStore.reopenRollout). */
  reopenRollout(id: string, reason: string): Promise<IssuedRollout> {
    return this.request('POST', `/api/rollouts/${encodeURIComponent(id)}/reopen`, { reason });
  }

  setStatus(id: string, change: StatusChange): Promise<Rollout> {
    return this.request('POST', `/api/rollouts/${encodeURIComponent(id)}/status`, change);
  }

  appendEvent(id: string, event: NewEventInput): Promise<RolloutEvent> {
    return this.request('POST', `/api/rollouts/${encodeURIComponent(id)}/events`, event);
  }

  async listEvents(id: string): Promise<RolloutEvent[]> {
    return (await this.request<{ items: RolloutEvent[] }>('GET', `/api/rollouts/${encodeURIComponent(id)}/events`)).items;
  }

  async listCalls(id: string, attempt?: number): Promise<CallRecord[]> {
    const query = attempt === undefined ? '' : `?attempt=${attempt}`;
    return (await this.request<{ items: CallRecord[] }>('GET', `/api/rollouts/${encodeURIComponent(id)}/calls${query}`)).items;
  }

  /** Resolves when the gateway answers. */
  async health(): Promise<void> {
    await this.request('GET', '/healthz');
  }

  /** Whether calls pinned to the version would reach a backend now (see the gateway's /ready route); 404 when it is not routed. */
  policyReady(version: string): Promise<{ ready: boolean; problems: string[] }> {
    return this.request('GET', `/api/policies/${encodeURIComponent(version)}/ready`);
  }

  registerPolicy(version: string, spec: PolicySpec): Promise<unknown> {
    return this.request('PUT', `/api/policies/${encodeURIComponent(version)}`, spec);
  }

  setAlias(alias: string, policyVersion: string): Promise<unknown> {
    return this.request('PUT', `/api/aliases/${encodeURIComponent(alias)}`, { policyVersion });
  }

  /** Waits (at most timeoutMs) until no call of the version is in flight, shadow calls to it included. */
  drainPolicy(version: string, timeoutMs: number): Promise<{ drained: boolean; inFlight: number }> {
    return this.request('POST', `/api/policies/${encodeURIComponent(version)}/drain?timeoutMs=${timeoutMs}`);
  }

  /** Mirrors the alias's production calls to the candidate version (see Router.setMirror). */
  setMirror(alias: string, candidate: string, sampleRate = 1): Promise<Mirror> {
    return this.request('PUT', `/api/mirrors/${encodeURIComponent(alias)}`, { candidate, sampleRate });
  }

  clearMirror(alias: string): Promise<Mirror> {
    return this.request('DELETE', `/api/mirrors/${encodeURIComponent(alias)}`);
  }

  async listMirrors(): Promise<Mirror[]> {
    return (await this.request<{ items: Mirror[] }>('GET', '/api/mirrors')).items;
  }

  /** One page (at most `limit`, default 100, at most 500); pass `next` as `after` for the following one. */
  listShadowCalls(filter: ShadowCallFilter = {}): Promise<Page<ShadowCallRecord>> {
    const query = new URLSearchParams(
      Object.entries(filter).flatMap(([key, value]) => (value === undefined ? [] : [[key, String(value)] as [string, string]])),
    ).toString();
    return this.request('GET', `/api/shadow-calls${query ? `?${query}` : ''}`);
  }

  private async request<T>(method: string, route: string, body?: unknown): Promise<T> {
    const key = typeof this.adminKey === 'string' ? this.adminKey : this.adminKey();
    let res: Response;
    try {
      res = await fetch(`${this.url}${route}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new GatewayRequestError(0, 'gateway_unreachable', `the gateway at ${this.url} is unreachable (${(err as Error).message}); is \`rein gateway\` running?`);
    }
    const text = await res.text();
    const parsed = text ? (JSON.parse(text) as unknown) : undefined;
    if (!res.ok) {
      const error = (parsed as { error?: { message?: string; code?: string } } | undefined)?.error;
      throw new GatewayRequestError(res.status, error?.code ?? 'error', `${method} ${route}: ${res.status} ${error?.message ?? text}`);
    }
    return parsed as T;
  }
}
