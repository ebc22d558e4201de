import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config/load.js';
import { configProblems } from '../../test/helpers/config-problems.js';
import { redactedStoreUrl, storeIdentity, storeLocation } from './location.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-store-location-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('store location', () => {
  it('is SQLite files in dataDir when store.url is unset', () => {
    const { config } = loadConfig({ env: {}, cwd: dir });
    expect(storeLocation(config)).toEqual({ dataDir: path.join(dir, '.rein'), postgresUrl: null });
  });

  it('is the PostgreSQL database store.url names, and REIN_STORE_URL overrides the file', () => {
    const fromFile = loadConfig({
      env: {},
      cwd: dir,
      overrides: { store: { url: 'postgresql://rein@db.internal/rein' } },
    });
    expect(storeLocation(fromFile.config).postgresUrl).toBe('postgresql://rein@db.internal/rein');
    const fromEnv = loadConfig({
      env: { REIN_STORE_URL: 'postgres://rein:pw@other:6543/traces' },
      cwd: dir,
      overrides: { store: { url: 'postgresql://rein@db.internal/rein' } },
    });
    expect(storeLocation(fromEnv.config).postgresUrl).toBe('postgres://rein:pw@other:6543/traces');
  });

  it('refuses another kind of URL, naming the setting and the accepted forms, without the password', () => {
    const [problem, ...rest] = configProblems(() =>
      loadConfig({ env: { REIN_STORE_URL: 'mysql://rein:hunter2@db/rein' }, cwd: dir }),
    );
    expect(rest).toEqual([]);
    expect(problem).toContain('store.url (from REIN_STORE_URL)');
    expect(problem).toContain('postgres://user:password@host:5432/database');
    expect(problem).toContain('unset for SQLite');
    expect(problem).not.toContain('hunter2');
    expect(configProblems(() => loadConfig({ env: { REIN_STORE_URL: 'traces.sqlite' }, cwd: dir }))[0]).toContain(
      'store.url',
    );
  });

  it('names one set of stores (whose production two runs share) by its PostgreSQL server and database, never the login, or by the absolute dataDir', () => {
    expect(storeIdentity({ dataDir: 'state/.rein', postgresUrl: null })).toBe(`sqlite:${path.resolve('state/.rein')}`);
    const shared = storeIdentity({ dataDir: dir, postgresUrl: 'postgres://rein:hunter2@db.internal:6543/rein' });
    expect(shared).toBe('postgres://db.internal:6543/rein');
    // Another login, another dataDir, the same database: the same production.
    expect(
      storeIdentity({
        dataDir: 'elsewhere',
        postgresUrl: 'postgresql://ops:other@db.internal:6543/rein?sslmode=require',
      }),
    ).toBe(shared);
    expect(storeIdentity({ dataDir: dir, postgresUrl: 'postgres://db.internal/rein' })).toBe(
      'postgres://db.internal:5432/rein',
    );
    expect(storeIdentity({ dataDir: dir, postgresUrl: 'postgres://rein@db.internal:6543/other' })).not.toBe(shared);
  });

  it('shows a URL without its password', () => {
    expect(redactedStoreUrl('postgres://rein:hunter2@db:5432/rein')).toBe('postgres://rein:***@db:5432/rein');
    expect(redactedStoreUrl('postgres://db/rein?password=hunter2&sslmode=require')).toBe(
      'postgres://db/rein?password=***&sslmode=require',
    );
    expect(redactedStoreUrl('postgres://rein@db/rein')).toBe('postgres://rein@db/rein');
    expect(redactedStoreUrl('not a url hunter2')).toBe('***');
  });
});
