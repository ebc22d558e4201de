import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { discordantPairs, mcnemarExactP } from '../../src/gate/paired-tests.js';
import { exampleLoopOptions } from '../../src/training/example-loop.js';
import { runLocalLoop } from '../../src/training/local-loop.js';

const workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-learning-'));
afterAll(() => rmSync(workDir, { recursive: true, force: true }));

describe('the embedded default learns through the real harness (plain code, no Temporal)', () => {
  it('raises held-out success well beyond noise after two short iterations', { timeout: 900_000 }, async () => {
    const log: string[] = [];
    const report = await runLocalLoop({
      ...exampleLoopOptions({ workDir, iterations: 2, tasksPerIteration: 16, samplesPerTask: 8 }),
      log: (line) => log.push(line),
    });
    const { before, after } = report.heldout;
    const { gained, lost } = discordantPairs(before.perTask, after.perTask);
    const p = mcnemarExactP(gained.length, lost.length);
    const summary = `${log.join('\n')}\ngained ${gained.length}, lost ${lost.length}, p ${p.toExponential(2)}`;
    console.log(summary); // the evidence, in the test log

    // All 128 pinned held-out tasks, replayed greedily through the example harness before and after.
    expect(Object.keys(before.perTask)).toHaveLength(128);
    expect(after.successRate - before.successRate, summary).toBeGreaterThanOrEqual(0.08);
    expect(p, summary).toBeLessThan(0.01);

    // What produced the new version is on record: its parent and the batch it was trained on.
    expect(report.iterations.map((i) => i.policyVersion)).toEqual(['v1', 'v2']);
    expect(report.iterations.every((i) => i.batch.sequences > 0 && i.trainer.steps > 0)).toBe(true);
    const lineage = (dir: string) => JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')).rein;
    const v2 = lineage(report.finalPolicy);
    expect(v2).toMatchObject({ parent: expect.stringMatching(/[/\\]v1$/), iteration: 2, batchContentHash: expect.any(String) });
    expect(lineage(v2.parent)).toMatchObject({ parent: expect.stringMatching(/models[/\\]base$/), iteration: 1 });
  });
});
