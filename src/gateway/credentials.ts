import type { FastifyRequest } from 'fastify';
import type { TraceStore } from '../store/trace-store.js';
import { GatewayHttpError } from './errors.js';
import { matchesHash, type RolloutKeyClaim, type RolloutKeys } from './keys.js';

/** The key a caller presents: `Authorization: Bearer`, or the `api-key` / `x-api-key` headers. */
export function credentialOf(req: FastifyRequest): string | undefined {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice(7).trim() || undefined;
  const header = req.headers['api-key'] ?? req.headers['x-api-key'];
  return typeof header === 'string' && header ? header : undefined;
}

/**
 * Who may do what on the gateway's port: the admin key uses the control API, a rollout key makes
 * its attempt's model calls and appends its events, a verifier key reads one rollout.
 */
export class GatewayCredentials {
  constructor(
    readonly keys: RolloutKeys,
    private readonly adminKeyHash: string,
    private readonly store: TraceStore,
  ) {}

  isAdmin(key: string | undefined): boolean {
    return key !== undefined && matchesHash(key, this.adminKeyHash);
  }

  /** A preHandler: the control API needs the admin key. */
  readonly requireAdmin = async (req: FastifyRequest): Promise<void> => {
    const key = credentialOf(req);
    if (!key)
      throw new GatewayHttpError(
        401,
        'missing_key',
        'the control API needs the admin key: send Authorization: Bearer <admin key>',
      );
    if (!this.isAdmin(key)) throw new GatewayHttpError(403, 'forbidden', 'this key may not use the control API');
  };

  /** A preHandler: the verifier reads what it judges with its own key, which can read one rollout and write nothing. */
  readonly requireAdminOrVerifier = async (req: FastifyRequest): Promise<void> => {
    const key = credentialOf(req);
    if (key && this.keys.verifyVerifierKey(key) === (req.params as { id: string }).id) return;
    if (key?.startsWith('vk-'))
      throw new GatewayHttpError(403, 'forbidden', 'a verifier key reads its own rollout only');
    await this.requireAdmin(req);
  };

  /** The rollout attempt a model call belongs to, from its key or (for the path form) its URL. */
  async authorizeCall(req: FastifyRequest, pathClaim?: RolloutKeyClaim): Promise<RolloutKeyClaim> {
    const key = credentialOf(req);
    const claim = key ? this.keys.verify(key) : undefined;
    if (!pathClaim) {
      if (!key) {
        throw new GatewayHttpError(
          401,
          'missing_key',
          'no API key: set OPENAI_API_KEY to the rollout key Rein issued for this rollout',
        );
      }
      if (!claim)
        throw new GatewayHttpError(401, 'invalid_key', 'the API key is not a valid rollout key for this gateway');
      return claim;
    }
    if (claim) {
      if (claim.rolloutId !== pathClaim.rolloutId || claim.attempt !== pathClaim.attempt) {
        throw new GatewayHttpError(403, 'forbidden', 'this rollout key belongs to another rollout attempt');
      }
      return claim;
    }
    if (this.isAdmin(key)) return pathClaim;
    // Without a rollout key, the path form is open only for a rollout created keyless on purpose.
    const rollout = await this.store.getRollout(pathClaim.rolloutId);
    if (!rollout || rollout.keyless) return pathClaim;
    throw key
      ? new GatewayHttpError(401, 'invalid_key', 'the API key is not a valid rollout key for this gateway')
      : new GatewayHttpError(
          401,
          'missing_key',
          `rollout ${pathClaim.rolloutId} was not created keyless; send its rollout key`,
        );
  }
}
