import type { Migration } from './migrations.js';

/**
 * The schema of the `coordination` store: what services sharing one database agree on, kept apart
 * from the journal (its own migrations, its own tables) so neither changes the other's.
 *
 * - gateway_members: one row per running gateway, rewritten on each heartbeat (every few seconds,
 *   not per call). A gateway admits its share of a backend's maxInFlight from the live rows (see
 *   src/gateway/backend-shares.ts). `view` is the membership the gateway's shares were computed from
 *   when it wrote `in_flight`, its calls in flight per limited backend (JSON).
 * - launch_leases: one row per running harness process of a kind that has a limit, taken before
 *   the launch, renewed while it runs and deleted after; a row past `expires_at` belongs to a holder
 *   that stopped renewing (a dead worker), and the next taker of that kind deletes it.
 *
 * Times are milliseconds since the epoch on the database's clock, so hosts whose clocks differ
 * still agree on who is live.
 */
export const COORDINATION_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'gateway members, launch leases',
    sql: `
CREATE TABLE gateway_members (
  id TEXT PRIMARY KEY,
  joined_at BIGINT NOT NULL,
  seen_at BIGINT NOT NULL,
  view TEXT NOT NULL,
  in_flight TEXT NOT NULL
);
CREATE TABLE launch_leases (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  holder TEXT NOT NULL,
  taken_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
);
CREATE INDEX launch_leases_kind ON launch_leases(kind, expires_at);
`,
  },
];

export interface GatewayMemberRow {
  id: string;
  joined_at: number;
  seen_at: number;
  view: string;
  in_flight: string;
}

export interface LaunchLeaseRow {
  id: string;
  kind: string;
  holder: string;
  taken_at: number;
  expires_at: number;
}

export interface CoordinationTables {
  gateway_members: GatewayMemberRow;
  launch_leases: LaunchLeaseRow;
}
