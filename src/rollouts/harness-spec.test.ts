import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../config/load.js';
import { harnessSchema, harnessVersion, programSpec } from './harness-spec.js';
import { programProblems } from './program.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-harness-spec-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the harness version', () => {
  it('is the same for the same spec however it is written, and changes with anything that defines the harness', () => {
    const a = harnessSchema.parse({
      version: '1.2',
      local: { command: 'node', args: ['agent.mjs', '{task}'], env: { A: '1', B: '2' } },
    });
    const b = harnessSchema.parse({
      local: { env: { B: '2', A: '1' }, args: ['agent.mjs', '{task}'], command: 'node' },
      version: '1.2',
    });
    expect(harnessVersion(a)).toBe(harnessVersion(b));
    expect(harnessVersion(a)).toMatch(/^h-[0-9a-f]{16}$/);
    expect(harnessVersion({ ...a, version: '1.3' })).not.toBe(harnessVersion(a));
    expect(harnessVersion({ ...a, local: { ...a.local!, args: ['agent.mjs', '--fast', '{task}'] } })).not.toBe(
      harnessVersion(a),
    );
    // How many may run at once schedules the harness; it does not define it.
    expect(harnessVersion({ ...a, maxRunning: 4 })).toBe(harnessVersion(a));
  });
});

describe('checks before anything launches', () => {
  it('names a command that is not on PATH, a path that is not executable, and a missing working directory', () => {
    const script = path.join(dir, 'agent.sh');
    writeFileSync(script, '#!/bin/sh\n');
    const spec = (command: string, cwd?: string) =>
      programSpec(harnessSchema.parse({ local: { command, ...(cwd && { cwd }) } }).local!);
    expect(programProblems('harness', spec('node'))).toEqual([]);
    expect(programProblems('harness', spec('no-such-agent-binary'))).toEqual([
      'harness.command: "no-such-agent-binary" is not on PATH; install it, or give its full path',
    ]);
    expect(programProblems('harness', spec(script))).toEqual([
      `harness.command: ${script} is not an executable file; fix the path or make it executable`,
    ]);
    chmodSync(script, 0o755);
    expect(programProblems('harness', spec(script))).toEqual([]);
    expect(programProblems('harness', spec('node', path.join(dir, 'nowhere')))).toEqual([
      `harness.cwd: ${path.join(dir, 'nowhere')} is not a directory`,
    ]);
  });
});

describe('harness and verifier in the config file', () => {
  it('resolve their working directory and path commands against the config file', () => {
    const file = path.join(dir, 'rein.yaml');
    writeFileSync(
      file,
      'harness:\n  local:\n    command: ./bin/agent\n    args: ["{task}"]\n    timeoutSeconds: 30\nverifier:\n  command: python3\n  cwd: checks\n',
    );
    const { config } = loadConfig({ file, env: {} });
    expect(config.harness?.local).toMatchObject({
      command: path.join(dir, 'bin/agent'),
      cwd: dir,
      timeoutSeconds: 30,
      envAllow: expect.arrayContaining(['PATH']),
    });
    expect(config.verifier).toMatchObject({ command: 'python3', cwd: path.join(dir, 'checks') });
    expect(config.rollouts).toEqual({
      concurrency: 16,
      maxAttempts: 2,
      dependencyWaitSeconds: 300,
      hiddenFields: ['answer'],
      rewardWeights: { success: 1 },
    });
  });

  it('reject a bad spec with the path, the value and what was expected', () => {
    const file = path.join(dir, 'bad.yaml');
    writeFileSync(file, 'harness:\n  local:\n    command: node\n    timeoutSeconds: -1\n    env: { "bad name": x }\n');
    expect(() => loadConfig({ file, env: {} })).toThrow(ConfigError);
    try {
      loadConfig({ file, env: {} });
    } catch (err) {
      expect((err as ConfigError).message).toContain('harness.local.timeoutSeconds: got -1; expected more than 0');
      expect((err as ConfigError).message).toMatch(/harness\.local\.env\.bad name/);
    }
  });
});
