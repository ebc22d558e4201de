import { AliasMovedError, type AliasChange, type PolicyRegistry, type StoredDecision } from './policy-registry.js';

/** The alias production traffic asks for; only a promotion or a rollback moves it. */
export const PRODUCTION_ALIAS = 'production';

/** Where the gateway learns that an alias moved (its control API); absent when no gateway is reachable from here. */
export interface AliasTarget {
  setAlias(alias: string, policyVersion: string): Promise<unknown>;
}

export class PromotionError extends Error {
  override name = 'PromotionError';
}

export interface AliasMove {
  change: AliasChange;
  /** False when the gateway could not be told: it picks the alias up from the registry when it starts. */
  gatewayUpdated: boolean;
  gatewayError?: string;
}

export interface PromoteRequest {
  version: string;
  actor: string;
  /** The gate decision that allows it; default: the newest one about this version against the current production. */
  decisionId?: string;
  /** Promote without a passing decision; the reason is recorded and the change is marked as an override. */
  override?: { reason: string };
}

/**
 * Moves `production` to a candidate. Without an override it takes a passing gate decision made
 * against the version production serves now: a pass against an older incumbent proves nothing
 * about the current one.
 */
export async function promote(
  registry: PolicyRegistry,
  gateway: AliasTarget | undefined,
  request: PromoteRequest,
): Promise<AliasMove> {
  const { version } = request;
  if (!(await registry.get(version)))
    throw new PromotionError(`policy ${version} is not registered; see \`rein policies\` for the versions there are`);
  const incumbent = await registry.alias(PRODUCTION_ALIAS);
  if (incumbent === version) throw new PromotionError(`${version} already serves production`);
  let decision: StoredDecision | undefined;
  if (!request.override) {
    decision = request.decisionId
      ? await registry.decision(request.decisionId)
      : (await registry.decisionsFor(version)).find((d) => d.incumbent === incumbent);
    const gateHint = `run \`rein gate ${version}\`, or promote with --override "<reason>"`;
    if (!decision)
      throw new PromotionError(
        `no gate decision compares ${version} with production (${incumbent ?? 'unset'}); ${gateHint}`,
      );
    if (decision.candidate !== version)
      throw new PromotionError(`decision ${decision.id} is about ${decision.candidate}, not ${version}`);
    if (decision.incumbent !== incumbent) {
      throw new PromotionError(
        `decision ${decision.id} compared ${version} with ${decision.incumbent}, but production is now ${incumbent ?? 'unset'}; ${gateHint}`,
      );
    }
    if (decision.verdict !== 'pass') {
      const reasons = (decision.record.reasons as string[] | undefined)?.join('; ') ?? 'see the decision';
      throw new PromotionError(
        `the gate refused ${version} (decision ${decision.id}): ${reasons}; fix the candidate, or promote with --override "<reason>"`,
      );
    }
  }
  const change = await movedOnlyFrom(
    incumbent,
    `${version} was being promoted`,
    `gate ${version} against it (\`rein gate ${version}\`), or promote with --override "<reason>"`,
    () =>
      registry.setAlias(
        PRODUCTION_ALIAS,
        version,
        {
          operation: 'promote',
          actor: request.actor,
          reason: request.override?.reason ?? `gate decision ${decision?.id ?? ''} passed`,
          override: request.override !== undefined,
          decisionId: decision?.id ?? null,
        },
        {
          expectedFrom: incumbent ?? null,
          statuses: { [version]: 'promoted', ...(incumbent && { [incumbent]: 'retired' }) },
        },
      ),
  );
  return { change, ...(await tellGateway(gateway, version)) };
}

/**
 * Moves `production` back to the version it served before the current one came in (a rollback of
 * a rollback goes further back, not forth).
 */
export async function rollback(
  registry: PolicyRegistry,
  gateway: AliasTarget | undefined,
  request: { actor: string; reason?: string },
): Promise<AliasMove> {
  const current = await registry.alias(PRODUCTION_ALIAS);
  if (!current) throw new PromotionError('production has never been set here, so there is nothing to roll back to');
  const arrival = (await registry.aliasHistory(PRODUCTION_ALIAS))
    .reverse()
    .find((c) => c.to === current && c.operation !== 'rollback' && c.from !== null);
  if (!arrival?.from) throw new PromotionError(`production (${current}) has no earlier version to roll back to`);
  const from = arrival.from;
  const change = await movedOnlyFrom(
    current,
    `it was being rolled back`,
    'look at `rein policies` and roll back again if you still want to',
    () =>
      registry.setAlias(
        PRODUCTION_ALIAS,
        from,
        { operation: 'rollback', actor: request.actor, reason: request.reason ?? `roll back ${current}` },
        { expectedFrom: current, statuses: { [from]: 'promoted', [current]: 'retired' } },
      ),
  );
  return { change, ...(await tellGateway(gateway, from)) };
}

/**
 * The version production serves, once `candidate` is known to be registered (a promotion needs its
 * lineage). A registry that never had a production starts it at `base`, registering that first as
 * a lineage root when it is not; only if production is still unset, so a start made meanwhile
 * elsewhere stands (the AliasMovedError here; asked again, this returns that one). The gateway is
 * told when it can be.
 */
export async function productionOrBase(
  registry: PolicyRegistry,
  gateway: AliasTarget | undefined,
  request: { base: { version: string; checkpointUri: string }; candidate: string; actor: string },
): Promise<string> {
  const { base, candidate } = request;
  if (!(await registry.get(candidate))) {
    throw new PromotionError(
      `policy ${candidate} is not registered; \`rein register ${candidate} --checkpoint URI\` records it (\`rein policies\` lists the versions)`,
    );
  }
  const current = await registry.alias(PRODUCTION_ALIAS);
  if (current) return current;
  if (!(await registry.get(base.version))) {
    await registry.register({
      ...base,
      parent: null,
      runId: null,
      iteration: null,
      batchContentHash: null,
      trainerMetrics: {},
    });
  }
  await registry.setAlias(
    PRODUCTION_ALIAS,
    base.version,
    { operation: 'set', actor: request.actor, reason: 'production was unset; it starts at the base policy' },
    { expectedFrom: null },
  );
  await gateway?.setAlias(PRODUCTION_ALIAS, base.version).catch(() => undefined);
  return base.version;
}

/** `move()`, a compare-and-set refusal (production moved meanwhile) said as a PromotionError naming both versions. */
async function movedOnlyFrom(
  expected: string | undefined,
  what: string,
  fix: string,
  move: () => Promise<AliasChange>,
): Promise<AliasChange> {
  try {
    return await move();
  } catch (err) {
    if (!(err instanceof AliasMovedError)) throw err;
    throw new PromotionError(
      `production moved from ${expected ?? 'unset'} to ${err.actual ?? 'unset'} while ${what}, by another promotion or rollback; ${fix.replace('against it', `against ${err.actual ?? 'it'}`)}`,
    );
  }
}

async function tellGateway(gateway: AliasTarget | undefined, version: string): Promise<Omit<AliasMove, 'change'>> {
  if (!gateway) return { gatewayUpdated: false, gatewayError: 'no gateway admin key here' };
  try {
    await gateway.setAlias(PRODUCTION_ALIAS, version);
    return { gatewayUpdated: true };
  } catch (err) {
    return { gatewayUpdated: false, gatewayError: (err as Error).message };
  }
}

/**
 * Points the gateway's aliases where the registry says: the gateway keeps its routes in memory,
 * so one that starts after a promotion learns it here. Returns what it could not apply.
 */
export async function restoreAliases(
  registry: PolicyRegistry,
  router: { setAlias(alias: string, version: string): void },
): Promise<string[]> {
  const skipped: string[] = [];
  for (const [alias, version] of Object.entries(await registry.aliases())) {
    try {
      router.setAlias(alias, version);
    } catch (err) {
      skipped.push(`${alias} → ${version}: ${(err as Error).message}`);
    }
  }
  return skipped;
}
