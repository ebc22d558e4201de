import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as cs from '../../src/api/console-schemas.js';
import * as s from '../../src/api/schemas.js';
import { bundleConsole } from '../../src/console/assets.js';
import { variants } from '../fixtures/iteration-variants.js';

/**
 * The console's pages for a run with an environment, in Chromium: the real bundle, its API answers
 * from fixtures that the API's own response schemas accept (no run: the real-run browser test is
 * test/integration/console.test.ts, which has no environment).
 */
const CHROMIUM = process.env.REIN_CHROMIUM ?? '/usr/bin/chromium';
const ORIGIN = 'http://rein.test';

declare const sessionStorage: { setItem(key: string, value: string): void };

const iterationView = cs.iterationView.parse({
  iteration: 1,
  candidate: 'r.v1',
  execution: 'COMPLETED',
  failed: null,
  meanReward: 0.5,
  heldout: { candidate: null, production: null, lower: null, upper: null, incumbent: null, meanReward: null },
  trainer: { loss: null, approxKl: null, clipFraction: null, entropy: null, gradNorm: null },
  trainerSteps: [],
  trainerLogprobs: null,
  tokens: { rollouts: null, trained: null },
  stageSeconds: {},
  samples: { sampledFrom: 'v0', keptByVersionsBehind: {} },
  failures: { train: {}, heldout: {} },
  gate: { verdict: 'pass', decisionId: 'd1', incumbent: 'v0', promoted: true, reasons: [] },
  workflows: [],
  variants,
});
const REFUSED =
  "the harness exited with 1 after model call c7 failed: the backend answered 400: This model's maximum context length is 1024 tokens";
const answers: Record<string, unknown> = {
  '/api/runs/r': s.runReport.parse({
    runId: 'r',
    execution: 'COMPLETED',
    startTime: new Date(0),
    resumes: [],
  }),
  '/api/aliases': s.aliases.parse({ aliases: { production: 'r.v2' }, history: [] }),
  '/api/runs/r/iterations': cs.runView.parse({
    runId: 'r',
    workflowUrl: null,
    iterations: [
      iterationView,
      {
        ...iterationView,
        iteration: 2,
        variants: null,
        failures: { train: { harness: 1 }, heldout: {} },
        failureReasons: { train: { harness: REFUSED }, heldout: {} },
      },
    ],
  }),
  '/api/decisions/d1': s.decision.parse({
    id: 'd1',
    candidate: 'r.v1',
    incumbent: 'v0',
    verdict: 'pass',
    createdAt: '2025-01-01T00:00:00Z',
    record: {
      checks: [],
      environment: {
        module: 'files@1.0.0:abc123',
        trainedIn: ['p1'],
        variants: [
          { id: 'p1', name: 'paged-1000', origin: 'rigger', kept: true, ledgerId: 'r.variant.p1' },
          { id: 'n3', name: 'noise-3', origin: 'declared', kept: false, ledgerId: 'r.variant.n3' },
        ],
      },
    },
  }),
  '/api/decisions/d1/pairs': { items: [] },
};

let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: run scripts/setup-tests.sh`);
  const assets = await bundleConsole();
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
  page = await browser.newPage();
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    const { pathname } = new URL(request.url());
    const asset = assets[pathname.replace(/^\/console\//, '') || 'index.html'];
    if (pathname in answers)
      return void request.respond({ contentType: 'application/json', body: JSON.stringify(answers[pathname]) });
    if (pathname.startsWith('/console/') && asset)
      return void request.respond({
        contentType: pathname.endsWith('.js') ? 'text/javascript' : 'text/html',
        body: asset,
      });
    if (pathname === '/console/app.css')
      return void request.respond({ contentType: 'text/css', body: assets['app.css'] });
    return void request.respond({ status: 404, contentType: 'application/json', body: '{}' });
  });
  await page.goto(`${ORIGIN}/console/`);
  await page.evaluate(() => sessionStorage.setItem('rein.adminKey', 'k'));
});
afterAll(async () => {
  await browser?.close();
});

const cells = (selector: string) =>
  page.$$eval(`${selector} tbody tr`, (rows) =>
    rows.map((r) => Array.from(r.querySelectorAll('td'), (td) => (td as { textContent: string | null }).textContent)),
  );

describe('the console for a run with an environment', () => {
  it("shows per iteration where training ran, the variants checked and the rigger's weaknesses", async () => {
    await page.goto(`${ORIGIN}/console/#/runs/r`);
    await page.waitForSelector('#variants-used');
    // Why rollouts failed, in the words their failures kept (the latest iteration that recorded any).
    expect(await cells('#failure-reasons')).toEqual([['training rollouts', 'harness', REFUSED]]);
    const used = variants.used!;
    expect(await cells('#variants-used')).toEqual(
      used.map((u) => [
        '1',
        u.name,
        u.origin,
        u.why,
        String(u.rollouts),
        `${u.solved} of ${u.scored} scored`,
        expect.any(String),
      ]),
    );
    expect(await cells('#variant-checks')).toEqual(
      variants.verdicts.map((v) => ['1', v.name, v.origin, v.kept ? 'kept' : 'rejected', v.reason, v.changes, v.why]),
    );
    expect(await cells('#weaknesses')).toEqual(
      variants.rigger!.weaknesses.map((w) => ['1', w.kind, w.subject, w.detail, `${(100 * w.share).toFixed(1)}%`]),
    );
    expect((await cells('#proposals')).map((row) => row[1])).toEqual(variants.rigger!.proposals.map((p) => p.name));
  });

  it('shows on a decision the environment module and each variant checked, kept or rejected, by its ledger row', async () => {
    await page.goto(`${ORIGIN}/console/#/decisions/d1`);
    await page.waitForSelector('#environment-variants');
    expect(await page.$eval('[data-module]', (e) => e.textContent)).toBe('files@1.0.0:abc123');
    expect(await cells('#environment-variants')).toEqual([
      ['paged-1000', 'rigger', 'kept', 'yes', 'r.variant.p1', 'p1'],
      ['noise-3', 'declared', 'rejected', 'no', 'r.variant.n3', 'n3'],
    ]);
  });
});
