import { createHash } from 'node:crypto';
import type { GatewayMember } from '../store/coordination-store.js';

/** A name for a set of live gateways: equal views mean equal shares. */
export function membershipView(memberIds: readonly string[]): string {
  return createHash('sha256')
    .update([...memberIds].sort().join('\n'))
    .digest('hex')
    .slice(0, 16);
}

/** Gateway `index` (of `members`, ordered by id) gets ⌊limit / members⌋, and one more while the remainder lasts. */
export function shareOf(limit: number, members: number, index: number): number {
  return Math.floor(limit / members) + (index < limit % members ? 1 : 0);
}

/**
 * How many calls gateway `me` may have in flight on `backend` (limit `limit` across all gateways),
 * from the live members' last heartbeats (ordered by id, `me` among them).
 *
 * Each gateway's share is ⌊limit / n⌋ (remainder to the lowest ids). While the gateways' reports
 * disagree on who is live (one joined or left since some of them last looked), none admits
 * anything new: their shares differ meanwhile. Once they agree, a gateway admits up to its share,
 * less what the others hold beyond theirs (calls admitted under an older, larger share, still
 * running), so the sum stays within the limit while those drain.
 */
export function admissionCap(limit: number, backend: string, me: string, members: readonly GatewayMember[]): number {
  const mine = members.findIndex((m) => m.id === me);
  if (mine < 0) return 0;
  const view = membershipView(members.map((m) => m.id));
  let othersHold = 0;
  for (const [index, member] of members.entries()) {
    if (index === mine) continue;
    if (member.view !== view) return 0;
    othersHold += Math.max(member.inFlight[backend] ?? 0, shareOf(limit, members.length, index));
  }
  return Math.max(0, Math.min(shareOf(limit, members.length, mine), limit - othersHold));
}
