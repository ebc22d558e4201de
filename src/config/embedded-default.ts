import path from 'node:path';
import { packageRoot } from '../package-root.js';
import type { ReinConfig } from './schema.js';

/** The backend name the embedded policy server has in the gateway's routing. */
export const EMBEDDED_BACKEND = 'embedded';

/** The base checkpoint shipped with Rein (warm-started on the example agent's demonstrations). */
export function embeddedBaseCheckpoint(): string {
  return path.join(packageRoot(), 'models', 'base');
}

/**
 * Fills in the embedded default: with no inference backend configured, the gateway routes to the
 * embedded policy server, which serves the run's base policy (alias `production`). The result is
 * what `rein config check` prints, so nothing here is hidden from the operator.
 */
export function withEmbeddedDefault(config: ReinConfig): ReinConfig {
  const { gateway, policyServer, run } = config;
  const enabled = policyServer.enabled ?? Object.keys(gateway.backends).length === 0;
  const base = { version: run.base.version, checkpoint: run.base.checkpoint ?? embeddedBaseCheckpoint() };
  const resolved: ReinConfig = { ...config, policyServer: { ...policyServer, enabled }, run: { ...run, base } };
  if (!enabled || gateway.backends[EMBEDDED_BACKEND]) return resolved;
  const host = policyServer.host === '0.0.0.0' || policyServer.host === '::' ? '127.0.0.1' : policyServer.host;
  return {
    ...resolved,
    gateway: {
      ...gateway,
      backends: {
        ...gateway.backends,
        [EMBEDDED_BACKEND]: {
          endpoints: [`http://${host}:${policyServer.port}/v1`],
          tokenIds: true,
          logprobs: true,
          // Every version it serves shares the base's tokenizer and template.
          tokenIn: { tokenizerDir: base.checkpoint, field: 'prompt_token_ids' },
        },
      },
      policies: { [base.version]: { backend: EMBEDDED_BACKEND, model: base.version }, ...gateway.policies },
      aliases: { production: base.version, ...gateway.aliases },
    },
  };
}
