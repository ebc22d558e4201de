import { validateConfig } from '../../src/config/load.js';
import { startDevServer, type DevServer } from '../../src/devserver/dev-server.js';
import { findTemporalCli } from '../../src/devserver/temporal-cli.js';

/** A headless Temporal dev server for tests on 127.0.0.1:`port`, keeping its state in `dbFile`. */
export function startTestDevServer(dbFile: string, port: number): Promise<DevServer> {
  return startDevServer({
    ...validateConfig({}, 'test defaults').temporal.devServer,
    cliPath: findTemporalCli(),
    ip: '127.0.0.1',
    port,
    headless: true,
    dbFile,
    readyTimeoutMs: 120_000,
  });
}
