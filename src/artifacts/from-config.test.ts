import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { configProblems } from '../../test/helpers/config-problems.js';
import { loadConfig } from '../config/load.js';
import { artifactStoreFromConfig } from './from-config.js';
import { LocalArtifactStore } from './local-store.js';
import { S3ArtifactStore } from './s3-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-artifacts-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('artifacts.url', () => {
  it('is the folder dataDir/artifacts by default, and an S3 bucket when set (REIN_ARTIFACTS_URL overrides the file)', () => {
    const local = artifactStoreFromConfig(loadConfig({ env: {}, cwd: dir }).config);
    expect(local).toBeInstanceOf(LocalArtifactStore);
    expect(local.url).toBe(pathToFileURL(path.join(dir, '.rein', 'artifacts')).href);
    const { config } = loadConfig({
      env: { REIN_ARTIFACTS_URL: 's3://rein-artifacts/team-a/', REIN_S3_ENDPOINT: 'http://127.0.0.1:9000' },
      cwd: dir,
    });
    expect(config.artifacts).toEqual({ url: 's3://rein-artifacts/team-a/', s3: { endpoint: 'http://127.0.0.1:9000' } });
    const s3 = artifactStoreFromConfig(config);
    expect(s3).toBeInstanceOf(S3ArtifactStore);
    expect(s3.url).toBe('s3://rein-artifacts/team-a');
    expect(s3.uriOf('runs/r1/iterations/1/batch.safetensors')).toBe(
      's3://rein-artifacts/team-a/runs/r1/iterations/1/batch.safetensors',
    );
  });

  it('refuses anything but s3://bucket/prefix, naming the setting and the form', () => {
    for (const url of ['/srv/artifacts', 'https://bucket.example.com/x', 's3://Bad_Bucket']) {
      const [problem, ...rest] = configProblems(() => loadConfig({ env: { REIN_ARTIFACTS_URL: url }, cwd: dir }));
      expect(rest).toEqual([]);
      expect(problem).toContain('artifacts.url (from REIN_ARTIFACTS_URL)');
      expect(problem).toContain('write s3://bucket/optional/prefix');
    }
  });
});
