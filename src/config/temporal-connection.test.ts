import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { validateConfig } from './load.js';
import { temporalConnectionOptions, usesEmbeddedServer } from './temporal-connection.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const settings = (temporal: object) => validateConfig({ temporal }, 'test').temporal;

describe('temporalConnectionOptions', () => {
  it('targets the embedded dev server when no address is set', () => {
    const s = settings({ devServer: { ip: '127.0.0.1', port: 7300 } });
    expect(usesEmbeddedServer(s)).toBe(true);
    expect(temporalConnectionOptions(s)).toEqual({ address: '127.0.0.1:7300' });
  });

  it('sends an API key over TLS only', () => {
    const s = settings({ address: 'ns.tmprl.cloud:7233', apiKey: 'key' });
    expect(usesEmbeddedServer(s)).toBe(false);
    expect(temporalConnectionOptions(s)).toEqual({ address: 'ns.tmprl.cloud:7233', apiKey: 'key', tls: true });
  });

  it('reads the mTLS certificate files', () => {
    writeFileSync(path.join(dir, 'client.pem'), 'CERT');
    writeFileSync(path.join(dir, 'client.key'), 'KEY');
    writeFileSync(path.join(dir, 'ca.pem'), 'CA');
    const options = temporalConnectionOptions(
      settings({
        address: 'temporal.internal:7233',
        tls: {
          clientCertPath: path.join(dir, 'client.pem'),
          clientKeyPath: path.join(dir, 'client.key'),
          serverCaCertPath: path.join(dir, 'ca.pem'),
          serverName: 'temporal.internal',
        },
      }),
    );
    expect(options.tls).toEqual({
      serverNameOverride: 'temporal.internal',
      serverRootCACertificate: Buffer.from('CA'),
      clientCertPair: { crt: Buffer.from('CERT'), key: Buffer.from('KEY') },
    });
  });

  it('refuses half an mTLS pair and unreadable files, naming the setting', () => {
    expect(() => temporalConnectionOptions(settings({ address: 'a:1', tls: { clientCertPath: '/x.pem' } }))).toThrow(
      /clientCertPath and clientKeyPath go together/,
    );
    expect(() =>
      temporalConnectionOptions(settings({ address: 'a:1', tls: { serverCaCertPath: path.join(dir, 'missing.pem') } })),
    ).toThrow(/temporal\.tls\.serverCaCertPath: cannot read .*missing\.pem/);
  });
});
