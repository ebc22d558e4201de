import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Rollout keys are derived, not stored: `rk-<rollout id>.<attempt>.<mac>`, where mac is an HMAC
 * of the rollout and attempt under the gateway's secret. Creating a rollout twice yields the
 * same key (idempotent creation), a key names the one rollout attempt it may write to, and
 * nothing in the database can be replayed as a key.
 */
const PREFIX = 'rk-';
const VERIFIER_PREFIX = 'vk-';

export interface RolloutKeyClaim {
  rolloutId: string;
  attempt: number;
}

/** Keys verified already, so a rollout's every call does not pay for an HMAC: at most this many. */
const VERIFIED_CACHE_SIZE = 8192;

export class RolloutKeys {
  /**
   * Keys that passed verification, by their exact text. A key's validity never changes (it is a
   * MAC under the secret), so nothing here needs invalidating; whether its rollout attempt still
   * takes calls is checked against the store on every call.
   */
  private readonly verified = new Map<string, RolloutKeyClaim>();

  constructor(private readonly secret: Buffer) {
    if (secret.length < 32) throw new Error('the gateway secret must be at least 32 bytes');
  }

  issue(rolloutId: string, attempt: number): string {
    return `${PREFIX}${Buffer.from(rolloutId).toString('base64url')}.${attempt}.${this.mac(rolloutId, attempt)}`;
  }

  /** The rollout attempt a key was issued for, or undefined for anything that is not a valid key. */
  verify(key: string): RolloutKeyClaim | undefined {
    const known = this.verified.get(key);
    if (known) return { ...known };
    const claim = this.verifyNow(key);
    if (claim) {
      if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value as string);
      this.verified.set(key, { ...claim });
    }
    return claim;
  }

  private verifyNow(key: string): RolloutKeyClaim | undefined {
    if (!key.startsWith(PREFIX)) return undefined;
    const [encodedId, attemptText, mac] = key.slice(PREFIX.length).split('.');
    if (!encodedId || !attemptText || !mac || !/^[1-9]\d{0,5}$/.test(attemptText)) return undefined;
    const rolloutId = Buffer.from(encodedId, 'base64url').toString();
    const attempt = Number(attemptText);
    const expected = Buffer.from(this.mac(rolloutId, attempt));
    const given = Buffer.from(mac);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    return { rolloutId, attempt };
  }

  /** A read-only key for a rollout's verifier: its calls and events, nothing else. */
  issueVerifierKey(rolloutId: string): string {
    return `${VERIFIER_PREFIX}${Buffer.from(rolloutId).toString('base64url')}.${this.mac(rolloutId, 'verifier')}`;
  }

  /** The rollout a verifier key reads, or undefined. */
  verifyVerifierKey(key: string): string | undefined {
    if (!key.startsWith(VERIFIER_PREFIX)) return undefined;
    const [encodedId, mac] = key.slice(VERIFIER_PREFIX.length).split('.');
    if (!encodedId || !mac) return undefined;
    const rolloutId = Buffer.from(encodedId, 'base64url').toString();
    const expected = Buffer.from(this.mac(rolloutId, 'verifier'));
    const given = Buffer.from(mac);
    return given.length === expected.length && timingSafeEqual(given, expected) ? rolloutId : undefined;
  }

  private mac(rolloutId: string, scope: number | 'verifier'): string {
    return createHmac('sha256', this.secret).update(`${rolloutId}\n${scope}`).digest('base64url').slice(0, 32);
  }
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Compares a presented admin key with the configured SHA-256 hash in constant time. */
export function matchesHash(key: string, hashHex: string): boolean {
  const given = Buffer.from(sha256Hex(key), 'hex');
  const expected = Buffer.from(hashHex, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** Reads the gateway secret, creating it (mode 0600) on first use. */
export function loadOrCreateSecret(file: string): Buffer {
  if (existsSync(file)) {
    const secret = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url');
    if (secret.length < 32) throw new Error(`${file}: the gateway secret must hold at least 32 bytes (base64url)`);
    return secret;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  const secret = randomBytes(32);
  writeFileSync(file, `${secret.toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  return secret;
}
