import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { EMBEDDED_BACKEND } from '../config/embedded-default.js';
import { GatewayControlClient } from '../gateway/control-client.js';
import { sha256Hex } from '../gateway/keys.js';
import { startGateway, type Gateway } from '../gateway/server.js';
import { startPolicyServer, type PolicyServer, type PolicyServerOptions } from '../policy/server.js';
import type { Serving } from '../registry/serving.js';
import { openTraceStore } from '../store/open.js';
import type { TraceStore } from '../store/trace-store.js';

export interface EmbeddedStack {
  store: TraceStore;
  policyServer: PolicyServer;
  gateway: Gateway;
  /** The gateway's control API, with an admin key made for this stack. */
  control: GatewayControlClient;
  /** Where new versions are loaded: the policy server, with the admin key made for this stack. */
  serving: Serving;
  close(): Promise<void>;
}

/**
 * The embedded default's serving side in this process: the policy server with the base checkpoint
 * as `v0` (alias `production`), and the gateway in front of it journaling into workDir.
 */
export async function startEmbeddedStack(options: {
  workDir: string;
  baseCheckpoint: string;
  artifacts?: PolicyServerOptions['artifacts'];
  postgresUrl?: string;
}): Promise<EmbeddedStack> {
  // The journal in workDir, or in the PostgreSQL database given.
  const store = await openTraceStore(
    { dataDir: options.workDir, postgresUrl: options.postgresUrl ?? null },
    path.join(options.workDir, 'traces.sqlite'),
  );
  let policyServer: PolicyServer | undefined;
  try {
    const servingKey = randomBytes(24).toString('base64url');
    policyServer = await startPolicyServer({
      host: '127.0.0.1',
      port: 0,
      models: { v0: options.baseCheckpoint },
      adminKey: servingKey,
      artifacts: options.artifacts,
    });
    const adminKey = randomBytes(24).toString('base64url');
    const gateway = await startGateway(
      {
        store,
        routing: {
          backends: {
            [EMBEDDED_BACKEND]: {
              endpoints: [policyServer.url],
              tokenIds: true,
              logprobs: true,
              tokenIn: { tokenizerDir: options.baseCheckpoint, field: 'prompt_token_ids' },
            },
          },
          policies: { v0: { backend: EMBEDDED_BACKEND, model: 'v0' } },
          aliases: { production: 'v0' },
        },
        secret: randomBytes(32),
        adminKeyHash: sha256Hex(adminKey),
      },
      { host: '127.0.0.1', port: 0 },
    );
    const server = policyServer;
    return {
      store,
      policyServer: server,
      gateway,
      control: new GatewayControlClient(gateway.url, adminKey),
      serving: { backend: EMBEDDED_BACKEND, endpoints: [server.url], apiKey: () => servingKey },
      async close() {
        await gateway.close();
        await server.close();
        await store.close();
      },
    };
  } catch (err) {
    await policyServer?.close();
    await store.close();
    throw err;
  }
}
