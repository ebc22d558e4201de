import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type ConfigError, loadConfig, validateConfig } from './load.js';
import { configJsonSchema } from './schema.js';
import { configProblems as problems } from '../../test/helpers/config-problems.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe('loadConfig', () => {
  it('fills every default when there is no file', () => {
    const { config, file } = loadConfig({ env: {}, cwd: dir });
    expect(file).toBeUndefined();
    expect(config.dataDir).toBe(path.join(dir, '.rein'));
    expect(config.temporal.address).toBeUndefined();
    expect(config.temporal).toMatchObject({
      namespace: 'default',
      taskQueue: 'rein',
      devServer: { ip: 'localhost', port: 7233, uiPort: 8233, headless: false, logLevel: 'warn' },
    });
    expect(config.temporal.devServer.dbFile).toBe(path.join(dir, '.rein', 'temporal', 'dev.sqlite'));
  });

  it('reads YAML and JSON alike', () => {
    const yaml = write('a.yaml', 'temporal:\n  taskQueue: q1\n  devServer: { port: 7300 }\n');
    const json = write('a.json', JSON.stringify({ temporal: { taskQueue: 'q1', devServer: { port: 7300 } } }));
    expect(loadConfig({ file: yaml, env: {} }).config).toEqual(loadConfig({ file: json, env: {} }).config);
  });

  it('resolves relative paths against the config file, not the working directory', () => {
    const file = write('paths.yaml', 'dataDir: ../elsewhere\ntemporal:\n  tls:\n    serverCaCertPath: certs/ca.pem\n');
    const { config } = loadConfig({ file, env: {}, cwd: '/' });
    expect(config.dataDir).toBe(path.resolve(dir, '../elsewhere'));
    expect(config.temporal.tls).toEqual({ serverCaCertPath: path.join(dir, 'certs/ca.pem') });
  });

  it('lets TEMPORAL_* variables point Rein at an existing server', () => {
    const file = write('env.yaml', 'temporal:\n  address: from-file:7233\n  namespace: from-file\n');
    const { config } = loadConfig({
      file,
      env: {
        TEMPORAL_ADDRESS: 'cloud.example:7233',
        TEMPORAL_NAMESPACE: 'rein.abc12',
        TEMPORAL_API_KEY: 'k',
        TEMPORAL_TLS_SERVER_NAME: 'cloud.example',
      },
    });
    expect(config.temporal).toMatchObject({
      address: 'cloud.example:7233',
      namespace: 'rein.abc12',
      apiKey: 'k',
      tls: { serverName: 'cloud.example' },
    });
  });

  it('names the environment variable behind a bad value', () => {
    expect(problems(() => loadConfig({ env: { TEMPORAL_TLS: 'perhaps' }, cwd: dir }))).toEqual([
      'temporal.tls (from TEMPORAL_TLS): got "perhaps"; expected boolean, or object',
    ]);
  });

  it('finds REIN_CONFIG, then rein.yaml in the working directory', () => {
    const sub = path.join(dir, 'sub');
    mkdirSync(sub, { recursive: true });
    writeFileSync(path.join(sub, 'rein.yaml'), 'temporal: { taskQueue: local }\n');
    expect(loadConfig({ env: {}, cwd: sub }).config.temporal.taskQueue).toBe('local');
    const other = write('other.yaml', 'temporal: { taskQueue: other }\n');
    expect(loadConfig({ env: { REIN_CONFIG: other }, cwd: sub }).config.temporal.taskQueue).toBe('other');
  });

  it('reports syntax errors with the file and position', () => {
    const yaml = write('bad.yaml', 'temporal: [1, 2\n');
    const err = (() => {
      try {
        loadConfig({ file: yaml, env: {} });
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(err?.source).toBe(yaml);
    expect(err?.problems[0]).toMatch(/^not valid YAML: .*line \d+, column \d+/);
    const json = write('bad.json', '{"temporal": }');
    expect(problems(() => loadConfig({ file: json, env: {} }))[0]).toMatch(/^not valid JSON: /);
  });
});

describe('validateConfig', () => {
  it('lists every problem with its path, the value found and what was expected', () => {
    expect(
      problems(() =>
        validateConfig(
          {
            dataDir: '',
            temporal: { devServer: { port: 0, uiPort: 'web', headless: 'yes', logLevel: 'loud' }, tls: 3 },
          },
          'test',
        ),
      ),
    ).toEqual([
      'dataDir: got ""; expected a non-empty string',
      'temporal.tls: got 3; expected boolean, or object',
      'temporal.devServer.port: got 0; expected at least 1',
      'temporal.devServer.uiPort: got "web"; expected number',
      'temporal.devServer.headless: got "yes"; expected boolean',
      'temporal.devServer.logLevel: got "loud"; expected one of: "debug", "info", "warn", "error"',
    ]);
  });

  it('says what a URL and an environment variable name look like', () => {
    expect(
      problems(() =>
        validateConfig(
          {
            gateway: {
              backends: { x: { endpoints: ['localhost:8000/v1'], apiKeyEnv: 'my key' } },
              policies: { p: { backend: 'x', model: 'm' } },
            },
          },
          'test',
        ),
      ),
    ).toEqual([
      'gateway.backends.x.endpoints.0: got "localhost:8000/v1"; expected an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1',
      'gateway.backends.x.apiKeyEnv: got "my key"; expected an environment variable name: letters, digits and _, not starting with a digit',
    ]);
  });

  it('rejects unknown keys and lists the known ones, at any depth', () => {
    expect(problems(() => validateConfig({ temporl: {}, temporal: { devServer: { prot: 1 } } }, 'test'))).toEqual([
      'temporal.devServer: unknown key "prot"; expected one of: ip, port, uiPort, httpPort, metricsPort, headless, dbFile, logLevel',
      '(top level): unknown key "temporl"; expected one of: $schema, dataDir, storage, artifacts, store, log, temporal, gateway, samples, harness, verifier, environment, rollouts, trainer, policyServer, run, api, worker, notifications, gate, retention',
    ]);
  });

  it('checks that gateway policies and aliases point at things that exist', () => {
    expect(
      problems(() =>
        validateConfig(
          {
            gateway: {
              backends: { vllm: { endpoints: ['http://gpu-1:8000/v1'] } },
              policies: { v1: { backend: 'vlm', model: 'Qwen/Qwen3-0.6B' } },
              aliases: { production: 'v2' },
            },
          },
          'test',
        ),
      ),
    ).toEqual([
      'gateway.policies.v1.backend: got "vlm"; expected a backend defined in gateway.backends (known: vllm)',
      'gateway.aliases.production: got "v2"; expected a policy version defined in gateway.policies (known: v1)',
    ]);
  });

  it('rejects a file whose top level is not a mapping', () => {
    expect(problems(() => validateConfig(['a'], 'test'))).toEqual(['(top level): got ["a"]; expected object']);
  });
});

describe('configJsonSchema', () => {
  it('documents every setting with its default', () => {
    const schema = configJsonSchema() as { properties: Record<string, { description?: string; default?: unknown }> };
    expect(schema.properties.dataDir).toMatchObject({
      default: '.rein',
      description: expect.stringContaining('data directory'),
    });
    expect(validateConfig({}, 'test').storage).toEqual({ minFreeMegabytes: 1024 });
    expect(Object.keys(schema.properties)).toEqual([
      '$schema',
      'dataDir',
      'storage',
      'artifacts',
      'store',
      'log',
      'temporal',
      'gateway',
      'samples',
      'harness',
      'verifier',
      'environment',
      'rollouts',
      'trainer',
      'policyServer',
      'run',
      'api',
      'worker',
      'notifications',
      'gate',
      'retention',
    ]);
  });
});
