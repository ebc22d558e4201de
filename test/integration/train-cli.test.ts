import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runRein, startRein } from '../helpers/cli.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-train-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Processes whose command line mentions the folder (harnesses and verifiers write there). */
const processesUnder = (folder: string) =>
  execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes(folder) && !line.includes('ps -eo'));

describe('rein train', () => {
  it('runs a tiny training run end to end and reports held-out success before and after', { timeout: 300_000 }, async () => {
    const out = path.join(dir, 'tiny');
    const { code, stdout, stderr } = await runRein(['train', '--iterations', '1', '--tasks', '8', '--samples', '4', '--heldout', '4', '--out', out]);
    expect(stderr).not.toContain('rein:');
    expect(code).toBe(0);
    expect(stdout).toMatch(/held-out v0: \d+\.\d%/);
    expect(stdout).toMatch(/iteration 1: train success \d+\.\d%/);
    expect(stdout).toMatch(/base {5}\d+\.\d%\nv1 {7}\d+\.\d% {3}\(\d+ tasks gained, \d+ lost; exact McNemar p = /);
    expect(stdout).toContain(`new policy: ${path.join(out, 'policies', 'v1')}`);
  });

  it('stops on Ctrl-C, killing the harnesses it started, and says what was kept', { timeout: 300_000 }, async () => {
    const out = path.join(dir, 'interrupted');
    const run = startRein(['train', '--iterations', '1', '--tasks', '8', '--samples', '8', '--heldout', '2', '--out', out]);
    await run.waitFor(/held-out v0/, 240_000);
    await new Promise((r) => setTimeout(r, 1500)); // training rollouts are running now
    expect(await run.stop('SIGINT')).toBe(1);
    expect(run.output().stderr).toContain('the training run was cancelled');
    expect(processesUnder(out)).toEqual([]);
  });

  it('refuses a size that is not a positive integer', async () => {
    const { code, stderr } = await runRein(['train', '--iterations', '0']);
    expect(code).toBe(2);
    expect(stderr).toContain("option '--iterations <n>' argument '0' is invalid. expected a positive integer");
  });
});
