import { describe, expect, it } from 'vitest';
import type { RunReport } from '../client/runs.js';
import { formatRunSummary, iterationLine } from './run-format.js';
import { variants } from '../../test/fixtures/iteration-variants.js';
import { wrapText } from '../text-table.js';
import { REPORT_WIDTH, variantsBlock } from './variants-format.js';

const iteration = { iteration: 2, candidate: 'r.v2', meanReward: 0.5, heldoutMeanReward: 0.75 };

describe("how the run report shows an iteration's environment variants", () => {
  it('shows where training ran, the verdicts, and the rigger’s weakness table and proposals', () => {
    const block = variantsBlock(variants);
    expect(block[0]).toMatch(/^ {2}trained in\s+origin\s+rollouts\s+solved\s+mean reward\s+why$/);
    expect(block[1]).toMatch(/^ {2}original\s+original\s+12\s+5\/12\s+0\.417\s+the environment unchanged/);
    expect(block.find((l) => l.includes('flaky-search-every-3'))).toMatch(/rigger\s+4\s+1\/3\s+0\.250\s+search fails/);
    expect(block.find((l) => l.includes('paged-1000'))).toMatch(/rigger\s+kept\s+solved by 2 of 4 samples: kept$/);
    expect(block.find((l) => l.includes('noise-3'))).toMatch(/declared\s+rejected\s+solved by every sample/);
    const header = block.findIndex((l) => /^ {2}weakness\s+subject\s+evidence\s+share$/.test(l));
    expect(header).toBeGreaterThan(0);
    expect(block[header + 1]).toMatch(/^ {2}tool_errors\s+search\s+6 of 10 search calls failed.*\s60%$/);
    expect(block.find((l) => l.includes('gives_up'))).toMatch(/runs\s+3 of 4 failures \(75%\) were give-ups\.\s+75%$/);
    expect(block.find((l) => l.includes('flaky-search-every-2'))).toMatch(/tool_errors search\s+search fails/);
    for (const line of block) expect(line.length).toBeLessThanOrEqual(REPORT_WIDTH);
    // Long evidence and reasons wrap under their own column: nothing is lost.
    const text = block
      .map((l) => l.replace(/\s+\d+%$/, ''))
      .join(' ')
      .replace(/\s+/g, ' ');
    for (const w of variants.rigger!.weaknesses) expect(text).toContain(w.detail);
    for (const u of variants.used!) expect(text).toContain(u.why);
  });

  it('says so when the rigger found no recurring weakness, and shows nothing without an environment', () => {
    expect(variantsBlock({ verdicts: [], used: [], rigger: { weaknesses: [], proposals: [] } })).toEqual([
      '  rigger: no recurring weakness with enough support',
    ]);
    expect(variantsBlock(undefined)).toEqual([]);
    expect(iterationLine(iteration)).toBe('iteration 2: r.v2  train mean reward 0.500, held-out 0.750');
  });

  it("says how the rigger's LLM fared, and where its call is journaled", () => {
    const rigger = { weaknesses: [], proposals: [] };
    const llm = { model: 'production', rolloutId: 'r.rigger.it1', proposed: 1, refused: 2 };
    expect(
      variantsBlock({ verdicts: [], rigger: { ...rigger, llm } })
        .slice(1)
        .join('\n'),
    ).toBe(
      '  rigger LLM: production, its call journaled under rollout r.rigger.it1: 1 proposed, 2 refused\n' +
        "    (the reasons are in the rigger's report)",
    );
    const failed = variantsBlock({
      verdicts: [],
      rigger: { ...rigger, llm: { ...llm, error: 'backend answered 503' } },
    });
    expect(failed.join(' ').replace(/\s+/g, ' ')).toContain('no answer (backend answered 503)');
    for (const line of failed) expect(line.length).toBeLessThanOrEqual(REPORT_WIDTH);
  });

  it('follows the iteration’s line in the follow output, and its own section in the final report', () => {
    const lines = iterationLine({ ...iteration, variants }).split('\n');
    expect(lines[0]).toBe('iteration 2: r.v2  train mean reward 0.500, held-out 0.750');
    expect(lines.slice(1)).toEqual(variantsBlock(variants));
    const report = {
      runId: 'r',
      execution: 'COMPLETED',
      startTime: new Date(0),
      resumes: [],
      status: {
        runId: 'r',
        state: 'finished',
        stage: 'done',
        nextIteration: 3,
        policyVersion: 'r.v2',
        iterations: [
          { ...iteration, iteration: 1, candidate: 'r.v1' },
          { ...iteration, variants },
        ],
      },
    } as unknown as RunReport;
    const summary = formatRunSummary(report);
    expect(summary).toContain(`\niteration 2, environment:\n${variantsBlock(variants).join('\n')}\n`);
    expect(summary).not.toContain('iteration 1, environment:');
  });

  it('wraps text at word boundaries within the width, cutting only a word longer than it', () => {
    expect(wrapText('a bb ccc dddd', 6)).toEqual(['a bb', 'ccc', 'dddd']);
    expect(wrapText('abcdefgh ij', 3)).toEqual(['abc', 'def', 'gh', 'ij']);
    expect(wrapText('', 5)).toEqual(['']);
  });
});
