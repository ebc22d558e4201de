import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/load.js';
import type { TraceStore } from '../store/trace-store.js';
import { gatewayOptions } from './from-config.js';

describe('gatewayOptions', () => {
  it('carries the timeouts of the gateway section to the server, defaults included', () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'rein-gateway-options-'));
    const options = (gateway: Record<string, unknown>) => {
      const { config } = loadConfig({
        env: { REIN_DATA_DIR: dataDir, REIN_GATEWAY_ADMIN_KEY: 'k' },
        cwd: dataDir,
        overrides: { gateway },
      });
      return gatewayOptions(config.gateway, {} as TraceStore, { REIN_GATEWAY_ADMIN_KEY: 'k' }).options;
    };
    expect(options({})).toMatchObject({ requestTimeoutMs: 30_000, headersTimeoutMs: 600_000, bodyTimeoutMs: 120_000 });
    expect(options({ requestTimeoutMs: 5000 })).toMatchObject({ requestTimeoutMs: 5000 });
  });
});
