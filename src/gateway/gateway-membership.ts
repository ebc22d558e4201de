import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Logger } from '../log/logger.js';
import type { CoordinationStore } from '../store/coordination-store.js';
import type { BackendLimits } from './backend-limits.js';
import { admissionCap, membershipView, shareOf } from './backend-shares.js';

export interface MembershipTiming {
  /** How often the gateway writes its heartbeat row and recomputes its shares. */
  heartbeatMs: number;
  /** A gateway whose row is older than this is not live: its share goes to the others. */
  memberTtlMs: number;
}

export const DEFAULT_MEMBERSHIP_TIMING: MembershipTiming = { heartbeatMs: 2_000, memberTtlMs: 10_000 };

/**
 * This gateway among the gateways sharing the store: a heartbeat row every heartbeatMs (not a
 * write per call), from which each limited backend's share is recomputed (see admissionCap).
 * A gateway that cannot write its heartbeat for half the time to live admits nothing new: the
 * others will soon count it dead and take its share.
 */
export class GatewayMembership {
  readonly id = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private view = '';
  private lastBeatAt = -Infinity;
  private beating: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: CoordinationStore,
    private readonly limits: BackendLimits,
    private readonly log: Logger,
    private readonly timing: MembershipTiming = DEFAULT_MEMBERSHIP_TIMING,
  ) {}

  /** Joins (one heartbeat, so calls can be admitted once the gateway listens), then beats on a timer. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => this.tick(), this.timing.heartbeatMs);
    this.timer.unref();
  }

  /** Stops beating and leaves, so the others take this gateway's share at their next heartbeat. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    await this.store.leave(this.id).catch(() => undefined);
  }

  private tick(): void {
    if (performance.now() - this.lastBeatAt > this.timing.memberTtlMs / 2)
      this.setCaps(0, 'its heartbeat to the store is late, so the other gateways may soon take its share');
    this.beating ??= this.beat()
      .catch((err: unknown) => this.log.warn({ err }, 'gateway heartbeat to the store failed'))
      .finally(() => (this.beating = undefined));
  }

  private async beat(): Promise<void> {
    const startedAt = performance.now();
    const members = await this.store.heartbeat(
      this.id,
      { view: this.view, inFlight: this.limits.inFlight() },
      this.timing.memberTtlMs,
    );
    this.lastBeatAt = startedAt;
    this.view = membershipView(members.map((m) => m.id));
    const index = members.findIndex((m) => m.id === this.id);
    for (const limit of this.limits.all()) {
      const { maxInFlight } = limit.spec;
      limit.setCap(
        admissionCap(maxInFlight, limit.backend, this.id, members),
        `its share of ${shareOf(maxInFlight, members.length, index)} among ${members.length} live gateways, ` +
          'less what the others still hold beyond theirs (none while they disagree on who is live)',
      );
    }
  }

  private setCaps(cap: number, reason: string): void {
    for (const limit of this.limits.all()) limit.setCap(cap, reason);
  }
}
