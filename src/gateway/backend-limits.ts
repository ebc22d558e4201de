import { RoutingError, type BackendSpec } from './routing.js';

/** A backend's limit on calls in flight across all gateways (gateway.backends.*.maxInFlight). */
export type BackendLimitSpec = NonNullable<BackendSpec['limit']>;

type Release = () => void;

interface Waiter {
  admit: (release: Release) => void;
  refuse: (err: Error) => void;
}

/** Retry-After on a call refused after waiting its longest: the queue was full that long. */
const RETRY_AFTER_SECONDS = 5;

/**
 * One backend's admission in this gateway: at most `cap` calls in flight (this gateway's share of
 * the backend's maxInFlight, set by GatewayMembership), the rest waiting in arrival order, each at
 * most maxQueueWaitMs. Under the cap a call is admitted synchronously: the proxy awaits nothing.
 */
export class BackendLimit {
  inFlight = 0;
  /** Until the first heartbeat sets it, nothing is admitted: the other gateways' calls are unknown. */
  private cap = 0;
  private capReason = 'this gateway has not yet heard from the store who else is live';
  private readonly queue: Waiter[] = [];

  constructor(
    readonly backend: string,
    readonly spec: BackendLimitSpec,
  ) {}

  /** A release function at once when a slot is free and nobody waits; else a promise of one. */
  enter(signal: AbortSignal): Release | Promise<Release> {
    if (this.inFlight < this.cap && this.queue.length === 0) return this.admitted();
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<Release>((resolve, reject) => {
      const waiter: Waiter = {
        admit: (release) => {
          done();
          resolve(release);
        },
        refuse: (err) => {
          done();
          reject(err);
        },
      };
      const timer = setTimeout(() => this.leave(waiter, this.waitedTooLong(waiter)), this.spec.maxQueueWaitMs);
      const aborted = () => this.leave(waiter, signal.reason ?? new Error('the harness went away'));
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', aborted);
      };
      signal.addEventListener('abort', aborted, { once: true });
      this.queue.push(waiter);
    });
  }

  /** Sets this gateway's share (and why it is what it is, for the refusal's message); admits who fits. */
  setCap(cap: number, reason: string): void {
    this.cap = cap;
    this.capReason = reason;
    this.admitWaiting();
  }

  get waiting(): number {
    return this.queue.length;
  }

  private admitted(): Release {
    this.inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      this.admitWaiting();
    };
  }

  private admitWaiting(): void {
    while (this.inFlight < this.cap && this.queue.length > 0) (this.queue.shift() as Waiter).admit(this.admitted());
  }

  private leave(waiter: Waiter, err: Error): void {
    const at = this.queue.indexOf(waiter);
    if (at >= 0) this.queue.splice(at, 1);
    waiter.refuse(err);
  }

  private waitedTooLong(waiter: Waiter): RoutingError {
    const { backend, spec } = this;
    return new RoutingError(
      `backend ${backend} is at its limit of ${spec.maxInFlight} calls in flight across all gateways ` +
        `(gateway.backends.${backend}.maxInFlight); this call waited ${spec.maxQueueWaitMs / 1000} s ` +
        `(gateway.backends.${backend}.maxQueueWaitSeconds) with ${this.queue.indexOf(waiter)} calls ahead of it ` +
        `(this gateway may have ${this.cap} now: ${this.capReason}); retry later, or raise the limit`,
      429,
      'backend_at_limit',
      RETRY_AFTER_SECONDS,
    );
  }
}

/** Every limited backend's admission in this gateway, by backend name. */
export class BackendLimits {
  private readonly byBackend: Map<string, BackendLimit>;

  constructor(specs: Record<string, BackendLimitSpec | undefined>) {
    this.byBackend = new Map(
      Object.entries(specs).flatMap(([name, spec]) => (spec ? [[name, new BackendLimit(name, spec)]] : [])),
    );
  }

  /** A release function for a call to `backend` (a no-op where it has no limit), or a promise of one. */
  enter(backend: string, signal: AbortSignal): Release | Promise<Release> {
    const limit = this.byBackend.get(backend);
    return limit ? limit.enter(signal) : noRelease;
  }

  get size(): number {
    return this.byBackend.size;
  }

  all(): BackendLimit[] {
    return [...this.byBackend.values()];
  }

  /** Calls in flight per limited backend: what this gateway reports in its heartbeat. */
  inFlight(): Record<string, number> {
    return Object.fromEntries(this.all().map((limit) => [limit.backend, limit.inFlight]));
  }
}

const noRelease: Release = () => undefined;
