import { validateConfig } from '../../src/config/load.js';
import { startDevServer, type DevServer } from '../../src/devserver/dev-server.js';
import { findTemporalCli } from '../../src/devserver/temporal-cli.js';
import { freePort } from './ports.js';

/** A headless Temporal dev server for tests on 127.0.0.1:`port`, keeping its state in `dbFile`. */
export async function startTestDevServer(dbFile: string, port: number): Promise<DevServer> {
  return startDevServer({
    ...validateConfig({}, 'test defaults').temporal.devServer,
    cliPath: findTemporalCli(),
    ip: '127.0.0.1',
    port,
    // Free ones, not port + 10 and + 11: tests start servers side by side.
    httpPort: await freePort(),
    metricsPort: await freePort(),
    headless: true,
    dbFile,
    readyTimeoutMs: 120_000,
  });
}
