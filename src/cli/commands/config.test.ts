import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../package-root.js';
import { reinInProcess } from '../../../test/helpers/cli-in-process.js';

/**
 * `rein config check` runs in this process (reinInProcess): the CLI's own entry point, without a child process's
 * start-up.
 */
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-config-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rein = reinInProcess;

/** A project folder with a config file (YAML text) in it. */
function project(name: string, yaml: string): { folder: string; file: string } {
  const folder = path.join(dir, name);
  mkdirSync(folder, { recursive: true });
  const file = path.join(folder, 'rein.yaml');
  writeFileSync(file, yaml);
  return { folder, file };
}

describe('rein config check', () => {
  it('exits 2 when the training task set is not there, naming the key, the path it resolved and the fix', async () => {
    const { folder, file } = project('no-train-tasks', 'run:\n  trainTasks: tasks/train.jsonl\n');
    for (const args of [
      ['config', 'check', file],
      ['--config', file, 'config', 'check'],
    ]) {
      const { code, stdout, stderr } = await rein(...args);
      expect(code).toBe(2);
      expect(stdout).toBe('');
      expect(stderr).toContain(`invalid config (${file})`);
      expect(stderr).toContain(
        `run.trainTasks: ${path.join(folder, 'tasks', 'train.jsonl')} does not exist; give the path of the JSONL task set to train on (relative paths in a config file are read from its folder, ${folder})`,
      );
    }
  });

  it('checks the held-out tasks, working directories, commands given as paths, templates and certificates the same way', async () => {
    const { folder, file } = project(
      'missing-files',
      [
        'harness:',
        '  local: { command: ./agent.sh, cwd: agent }',
        'verifier: { command: node, cwd: verifier }',
        'run: { heldoutTasks: heldout.jsonl, trainTasks: tasks, base: { checkpoint: checkpoints/base } }',
        'samples: { tokenizerDir: tokenizer }',
        'trainer: { kubernetes: { template: trainer-job.yaml, image: rein, kubeconfig: kube.yaml } }',
        'temporal: { address: "temporal:7233", tls: { clientCertPath: client.pem, clientKeyPath: client.key } }',
        '',
      ].join('\n'),
    );
    mkdirSync(path.join(folder, 'tasks'));
    const { code, stderr } = await rein('config', 'check', file);
    expect(code).toBe(2);
    const problems = stderr
      .split('\n')
      .filter((line) => line.startsWith('  - '))
      .map((line) => line.slice(4).split(':')[0]);
    expect(problems.sort()).toEqual(
      [
        'run.trainTasks',
        'run.heldoutTasks',
        'run.base.checkpoint',
        'samples.tokenizerDir',
        'harness.local.cwd',
        'verifier.cwd',
        'trainer.kubernetes.template',
        'trainer.kubernetes.kubeconfig',
        'temporal.tls.clientCertPath',
        'temporal.tls.clientKeyPath',
      ].sort(),
    );
    expect(stderr).toContain(
      `run.trainTasks: ${path.join(folder, 'tasks')} is a folder, not a file; give the path of the JSONL task set to train on`,
    );
    expect(stderr).toContain(
      `harness.local.cwd: ${path.join(folder, 'agent')} does not exist; give the harness's working directory`,
    );
    expect(stderr).toContain(
      `run.heldoutTasks: ${path.join(folder, 'heldout.jsonl')} does not exist; give the path of the JSONL task set replayed at the gate, or remove the key`,
    );
  });

  it('names a command given as a path that is not an executable file', async () => {
    const { folder, file } = project(
      'command',
      'harness:\n  local: { command: ./agent.sh }\nverifier: { command: bin/verify }\n',
    );
    writeFileSync(path.join(folder, 'agent.sh'), '#!/bin/sh\n');
    chmodSync(path.join(folder, 'agent.sh'), 0o644);
    const { code, stderr } = await rein('config', 'check', file);
    expect(code).toBe(2);
    expect(stderr).toContain(
      `harness.local.command: ${path.join(folder, 'agent.sh')} is not executable; make it executable (chmod +x)`,
    );
    expect(stderr).toContain(
      `verifier.command: ${path.join(folder, 'bin', 'verify')} does not exist; give the path of the verifier program`,
    );
  });

  it('passes a config whose files are all there, and prints it', async () => {
    const file = path.join(packageRoot(), 'examples', 'calculator-agent', 'rein.yaml');
    const { code, stdout, stderr } = await rein('config', 'check', file);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toContain(`trainTasks: ${path.join(path.dirname(file), 'train.jsonl')}`);
  });
});

describe('rein train', () => {
  it('exits 2 before connecting to anything when a task set is not there', async () => {
    const { folder, file } = project(
      'train',
      'harness:\n  local: { command: node }\nverifier: { command: node }\nrun: { trainTasks: train.jsonl }\ntemporal: { address: "127.0.0.1:1" }\n',
    );
    const { code, stderr } = await rein('--config', file, 'train');
    expect(code).toBe(2);
    expect(stderr).toContain(
      `run.trainTasks: ${path.join(folder, 'train.jsonl')} does not exist; give the path of the JSONL task set to train on`,
    );
  });
});
