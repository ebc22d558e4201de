import { describe, expect, it } from 'vitest';
import { validateConfig } from '../config/load.js';
import { devServerArgs } from './dev-server.js';

const defaults = validateConfig({}, 'test').temporal.devServer;

describe('devServerArgs', () => {
  it('persists to the SQLite file and serves the Web UI on the configured port', () => {
    const args = devServerArgs({
      ...defaults,
      dbFile: '/data/dev.sqlite',
      cliPath: 'temporal',
      namespaces: ['default', 'rein'],
    });
    expect(args.slice(0, 2)).toEqual(['server', 'start-dev']);
    expect(args.join(' ')).toContain('--db-filename /data/dev.sqlite');
    expect(args.join(' ')).toContain('--ui-port 8233');
    // Nothing left for the CLI to pick at random that a user could set: HTTP API and metrics beside the gRPC port.
    expect(args.join(' ')).toContain('--port 7233 --http-port 7243 --metrics-port 7244');
    expect(args.join(' ')).toContain('--namespace rein');
    expect(args).not.toContain('default');
    expect(args).not.toContain('--headless');
  });

  it('drops the UI flags when headless', () => {
    const args = devServerArgs({ ...defaults, headless: true, cliPath: 'temporal' });
    expect(args).toContain('--headless');
    expect(args).not.toContain('--ui-port');
  });
});
