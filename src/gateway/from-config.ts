import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { GatewaySettings } from '../config/schema.js';
import type { TraceStore } from '../store/trace-store.js';
import { tracingOptions } from '../telemetry/settings.js';
import { GatewayControlClient, GatewayRequestError } from './control-client.js';
import { loadOrCreateSecret, sha256Hex } from './keys.js';
import { redactionRules } from './redact.js';
import type { RoutingTable } from './routing.js';
import type { GatewayOptions } from './server.js';

/** How long a call waits for a slot of a backend at its maxInFlight, unless its maxQueueWaitSeconds says. */
const DEFAULT_QUEUE_WAIT_SECONDS = 300;

export interface ResolvedGateway {
  options: GatewayOptions;
  /** Where the admin key was found or generated, for the operator. */
  adminKeySource: string;
}

/** Turns the `gateway` config section into what startGateway takes, reading secrets from their files and env. */
export function gatewayOptions(
  settings: GatewaySettings,
  store: TraceStore,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedGateway {
  const { hash, source } = adminKeyHash(settings, env);
  return {
    adminKeySource: source,
    options: {
      store,
      routing: routingTable(settings, env),
      secret: loadOrCreateSecret(settings.secretFile),
      adminKeyHash: hash,
      ...(settings.publicUrl && { publicUrl: settings.publicUrl.replace(/\/$/, '') }),
      bodyLimitBytes: settings.bodyLimitBytes,
      requestTimeoutMs: settings.requestTimeoutMs,
      redaction: redactionRules(settings.redact.rules, settings.redact.defaults),
      headersTimeoutMs: settings.headersTimeoutMs,
      bodyTimeoutMs: settings.bodyTimeoutMs,
      retryAfterSeconds: settings.retryAfterSeconds,
      maxShadowsInFlight: settings.maxShadowsInFlight,
      tracing: tracingOptions(settings.tracing, env),
    },
  };
}

export function routingTable(settings: GatewaySettings, env: NodeJS.ProcessEnv = process.env): RoutingTable {
  const backends: RoutingTable['backends'] = {};
  for (const [name, backend] of Object.entries(settings.backends)) {
    let apiKey: string | undefined;
    if (backend.apiKeyEnv) {
      apiKey = env[backend.apiKeyEnv];
      if (!apiKey) {
        throw new Error(
          `gateway.backends.${name}.apiKeyEnv names ${backend.apiKeyEnv}, which is not set in the environment`,
        );
      }
    }
    backends[name] = {
      endpoints: backend.endpoints.map((e) => e.replace(/\/$/, '')),
      apiKey,
      tokenIds: backend.tokenIds,
      logprobs: backend.logprobs,
      nativeApis: backend.nativeApis,
      tokenIn: backend.tokenIn,
      ...(backend.maxInFlight !== undefined && {
        limit: {
          maxInFlight: backend.maxInFlight,
          maxQueueWaitMs: (backend.maxQueueWaitSeconds ?? DEFAULT_QUEUE_WAIT_SECONDS) * 1000,
        },
      }),
    };
  }
  return {
    backends,
    policies: settings.policies,
    aliases: settings.aliases,
    ...(settings.defaultModel !== undefined && { defaultModel: settings.defaultModel }),
  };
}

/** The admin key: REIN_GATEWAY_ADMIN_KEY, else gateway.adminKeyHash, else a key generated beside the secret. */
export function adminKeyHash(settings: GatewaySettings, env: NodeJS.ProcessEnv): { hash: string; source: string } {
  if (env.REIN_GATEWAY_ADMIN_KEY)
    return { hash: sha256Hex(env.REIN_GATEWAY_ADMIN_KEY), source: 'REIN_GATEWAY_ADMIN_KEY' };
  if (settings.adminKeyHash) return { hash: settings.adminKeyHash, source: 'gateway.adminKeyHash' };
  const file = adminKeyFile(settings);
  if (!existsSync(file)) {
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `rein-admin-${randomBytes(24).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
  }
  return { hash: sha256Hex(readFileSync(file, 'utf8').trim()), source: file };
}

/** Where a generated admin key lives (mode 0600), next to the gateway secret. */
export function adminKeyFile(settings: GatewaySettings): string {
  return path.join(path.dirname(settings.secretFile), 'admin-key');
}

/** Where the gateway is reached, as configured: its publicUrl, else http://host:port. */
export function gatewayUrl(settings: Pick<GatewaySettings, 'publicUrl' | 'host' | 'port'>): string {
  return (settings.publicUrl ?? `http://${settings.host}:${settings.port}`).replace(/\/$/, '');
}

/**
 * The control API client for workers: the gateway's URL and the admin key from
 * REIN_GATEWAY_ADMIN_KEY or the generated key file. The file is read when a request needs it, so
 * a worker started before the gateway's first start works once the gateway has written it.
 * Undefined when no key can ever be read (a gateway configured with only a key hash).
 */
export function gatewayControlFromConfig(
  settings: GatewaySettings,
  env: NodeJS.ProcessEnv = process.env,
): GatewayControlClient | undefined {
  const url = gatewayUrl(settings);
  if (env.REIN_GATEWAY_ADMIN_KEY) return new GatewayControlClient(url, env.REIN_GATEWAY_ADMIN_KEY);
  if (settings.adminKeyHash) return undefined;
  const file = adminKeyFile(settings);
  let key: string | undefined;
  return new GatewayControlClient(url, () => {
    key ??= existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined;
    if (!key)
      throw new GatewayRequestError(
        0,
        'no_admin_key',
        `no gateway admin key yet: \`rein gateway\` writes ${file} when it first starts (or set REIN_GATEWAY_ADMIN_KEY)`,
      );
    return key;
  });
}
