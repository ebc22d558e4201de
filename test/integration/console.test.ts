import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiServer } from '../../src/api/server.js';
import type { Client } from '@temporalio/client';
import { promotionGuard, startRun, trainingRunInput } from '../../src/client/runs.js';
import { loadConfig } from '../../src/config/load.js';
import type { ReinConfig } from '../../src/config/schema.js';
import { packageRoot } from '../../src/package-root.js';
import { startApiStack } from '../helpers/api-stack.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { freshNamespace } from '../helpers/temporal.js';

/**
 * Debian's Chromium (scripts/setup-tests.sh, which npm test runs, installs it): puppeteer's own download needs the
 * internet.
 */
const CHROMIUM = process.env.REIN_CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots land here; CI keeps the folder as the test's artifacts. */
const ARTIFACTS = process.env.REIN_TEST_ARTIFACTS
  ? path.join(process.env.REIN_TEST_ARTIFACTS, 'console')
  : path.join(packageRoot(), 'test-artifacts', 'console');
/** Where a headless dev server's Web UI would be; the console builds its workflow links from it. */
const TEMPORAL_UI = 'http://127.0.0.1:1/temporal-ui';
// Long enough that a version name cut short (as "What changed" once was, at 16 characters) shows.
const RUN = 'console-run-of-two-1';

// What the page's own code touches, as the browser runs it (this file is compiled without the DOM library).
declare const document: { querySelector(selector: string): { textContent: string | null } | null };
declare const sessionStorage: { getItem(key: string): string | null; setItem(key: string, value: string): void };
declare const location: { href: string; hash: string };
type Uplotted = { uplot?: { data: Array<ArrayLike<number | null>> } };

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-console-'));
let api: ApiServer;
let key: string;
let config: ReinConfig;
let client: Client;
const SECRET = 'sk-consoletest0123456789abcdef';
let browser: Browser;
const closers: Array<() => Promise<unknown> | unknown> = [];
// Its own namespace: the runs page lists (and asks the status of) this file's runs only, not every
// other test file's, whose workers may be gone.
let namespace: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `no Chromium at ${CHROMIUM}: run scripts/setup-tests.sh (it installs Debian's chromium; npm test runs it), or point REIN_CHROMIUM at one`,
    );
  // Two iterations, so every curve has two points; two held-out tasks for the gate.
  namespace = await freshNamespace();
  const { file } = await writeExampleConfig(
    dir,
    { iterations: 2, tasksPerIteration: 2, samplesPerTask: 2, heldoutLimit: 2 },
    { samples: { zeroVarianceGroups: 'keep' } },
    // A secret in the harness's environment, which the config view must not show.
    { namespace, harnessEnv: { CALC_SERVICE_TOKEN: SECRET } },
  );
  ({ config } = loadConfig({ file, env: {} }));
  const stack = await startApiStack(config, { temporalUiUrl: TEMPORAL_UI });
  closers.push(() => stack.close());
  ({ api, key, client } = stack);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
  closers.push(() => browser.close());
  mkdirSync(ARTIFACTS, { recursive: true });
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  rmSync(dir, { recursive: true, force: true });
});

const call = async (method: string, url: string, body?: unknown) => {
  const res = await fetch(`${api.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as any };
};

/** The points a chart plots, as its uPlot instance holds them: [x values, series 1, series 2, ...]. */
const plotted = (page: Page, chart: string) =>
  page.$eval(`[data-chart="${chart}"]`, (element) => {
    const data = (element as unknown as Uplotted).uplot?.data;
    return data?.map((series: ArrayLike<number | null>) => Array.from(series));
  });
const seriesLabels = (page: Page, chart: string) =>
  page.$$eval(`[data-chart="${chart}"] .u-legend .u-series .u-label`, (labels) => labels.map((l) => l.textContent));

type Recorded = { trainerMetrics: Record<string, any> };

/**
 * Each optimizer step of every iteration, in order, as the trainer recorded it (none when every minibatch lacked an
 * advantage signal: then the charts say so), and the trainer's log-prob gap per iteration.
 */
async function expectStepCurves(page: Page, trained: Recorded[]): Promise<void> {
  const steps = trained.flatMap((p) => p.trainerMetrics.stepMetrics as Array<Record<string, number>>);
  expect(steps.length).toBe(trained.reduce((n, p) => n + (p.trainerMetrics.steps as number), 0));
  if (steps.length === 0) {
    expect(await page.$eval('[data-chart="step-loss"] [data-empty]', (e) => e.textContent)).toMatch(/No step/);
  } else {
    const xs = steps.map((_, n) => n + 1);
    expect(await plotted(page, 'step-loss')).toEqual([xs, steps.map((s) => s.loss)]);
    expect(await plotted(page, 'step-gradNorm')).toEqual([xs, steps.map((s) => s.gradNorm)]);
  }
  expect((await plotted(page, 'logprob-gap'))?.[1]).toEqual(
    trained.map((p) => p.trainerMetrics.trainerLogprobs.meanAbsDiff),
  );
}

/** Every chart zooms by dragging across it and reads the value under the cursor in its legend. */
async function expectZoomAndHover(page: Page, chart: string): Promise<void> {
  const over = await page.$(`[data-chart="${chart}"] .u-over`);
  await over!.scrollIntoView();
  const box = (await over!.boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const legend = await page.$eval(
    `[data-chart="${chart}"] .u-legend .u-series:nth-child(2) .u-value`,
    (e) => e.textContent,
  );
  expect(legend).toMatch(/^-?\d/);
  const scale = () =>
    page.$eval(`[data-chart="${chart}"]`, (e) => {
      const x = (e as unknown as { uplot: { scales: { x: { min: number; max: number } } } }).uplot.scales.x;
      return [x.min, x.max];
    });
  const [min, max] = await scale();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.7, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  const [zoomedMin, zoomedMax] = await scale();
  expect(zoomedMin).toBeGreaterThan(min!);
  expect(zoomedMax).toBeLessThan(max!);
}

const shoot = (page: Page, name: string) =>
  page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

async function logIn(page: Page): Promise<void> {
  await page.goto(`${api.url}/`);
  await page.waitForSelector('form#login');
  await page.type('form#login input[name=key]', 'not-the-key');
  await page.click('form#login button');
  await page.waitForFunction(() =>
    document.querySelector('form#login .error')?.textContent?.startsWith('That key was refused'),
  );
  await page.$eval('form#login input[name=key]', (input) => ((input as unknown as { value: string }).value = ''));
  await page.type('form#login input[name=key]', key);
  await page.click('form#login button');
  await page.waitForSelector('h1');
  await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'Runs');
}

describe('the Rein console', () => {
  it('serves its page, script and styles from the package, with their content types, and documents its reads', async () => {
    const root = await fetch(`${api.url}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/console/');
    for (const [file, type] of [
      ['', 'text/html'],
      ['app.js', 'text/javascript'],
      ['app.css', 'text/css'],
    ]) {
      const res = await fetch(`${api.url}/console/${file}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain(type);
      const text = await res.text();
      // Nothing from a CDN: no absolute URL is loaded by the page.
      expect(text).not.toMatch(/(src|href)=["']https?:/);
    }
    expect(await (await fetch(`${api.url}/console/app.css`)).text()).toContain('.uplot');
    expect((await fetch(`${api.url}/console/nothing.js`)).status).toBe(404);
    // Its icon, linked by the page and at the address browsers ask by habit.
    for (const icon of ['/favicon.ico', '/console/favicon.svg']) {
      const res = await fetch(`${api.url}${icon}`);
      expect([res.status, res.headers.get('content-type')]).toEqual([200, 'image/svg+xml']);
    }
    const { paths } = (await (await fetch(`${api.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining([
        '/api/runs/{runId}/iterations',
        '/api/rollouts/{rolloutId}',
        '/api/decisions/{decisionId}/pairs',
      ]),
    );
    expect(await call('GET', '/api/rollouts/no-such-rollout')).toMatchObject({
      status: 404,
      body: { error: { code: 'rollout_not_found' } },
    });
    expect(await call('GET', `/api/rollouts/${'x'.repeat(200)}`)).toMatchObject({ status: 414 });
  });

  it('shows a page whose data could not be fetched once it can be, saying why meanwhile', async () => {
    const page = await browser.newPage();
    try {
      await logIn(page);
      // (logIn tried a wrong key first.)
      // The runs list fails once (a server restarting): the page says why, then shows the list by itself.
      let failures = 0;
      await page.setRequestInterception(true);
      page.on('request', (request) => {
        if (request.url().includes('/api/runs') && failures++ === 0)
          void request.respond({
            status: 503,
            contentType: 'application/json',
            body: JSON.stringify({ error: { code: 'unavailable', message: 'the API is restarting' } }),
          });
        else void request.continue();
      });
      await page.evaluate((k) => sessionStorage.setItem('rein.adminKey', k), key);
      await page.reload();
      await page.waitForSelector('[data-retrying]');
      expect(await page.$eval('[data-error]', (e) => e.textContent)).toBe('the API is restarting');
      await page.waitForFunction(() => document.querySelector('h1')?.textContent === 'Runs', { timeout: 20_000 });
    } finally {
      await page.close();
    }
  });

  it(
    'after a real run, plots the run’s numbers, follows a decision to a rollout, and shows releases and ledgers',
    { timeout: 240_000 },
    async () => {
      const page = await browser.newPage();
      await page.setViewport({ width: 1400, height: 900 });
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(String(err)));
      await logIn(page);
      // The key is kept in this tab's session, never in the address.
      expect(await page.evaluate(() => sessionStorage.getItem('rein.adminKey'))).toBe(key);
      expect(page.url()).not.toContain(key);

      expect(await call('POST', '/api/runs', { runId: RUN })).toMatchObject({ status: 201 });
      // The run page, opened while the run goes on, follows it to the end by itself.
      await page.goto(`${api.url}/console/#/runs/${RUN}`);
      await page.waitForSelector('[data-state]');
      // Before the first iteration ends, a chart says it has nothing to show rather than drawing empty axes.
      // (The iteration under way may be listed already, with nothing recorded yet.)
      expect(await page.$eval('[data-chart="reward"] [data-empty]', (e) => e.textContent)).toMatch(
        /^No data yet: no iteration has (finished|recorded it)\.$/,
      );
      // While it runs, what it does now: its stage, and the trainer's log of the last update once one began.
      await page.waitForSelector('[data-now]');
      await page.waitForSelector('[data-update-log]', { timeout: 200_000 });
      await page.waitForSelector('[data-state="finished"]', { timeout: 200_000 });
      expect(page.url()).not.toContain(key);
      // Once it ended, the last update's log, as the artifact store has it (the trainer's result line ends it).
      await page.waitForSelector('[data-update-log="2"]');
      const trainerLog = (await call('GET', `/api/runs/${RUN}/iterations/2/log`)).body;
      expect(trainerLog.text).toContain('"batchContentHash"');
      expect(await page.$eval('[data-update-log="2"] pre', (e) => e.textContent)).toBe(trainerLog.text);
      // What serves production, apart from the version the run trains from (a candidate its gate may have refused).
      const serving = (await call('GET', '/api/aliases')).body.aliases.production ?? '';
      expect(await page.$eval('[data-production]', (e) => e.getAttribute('data-production'))).toBe(serving);
      expect(await page.$eval('[data-trains-from]', (e) => e.textContent)).toMatch(
        new RegExp(`^${RUN}\\.v2 \\((promoted|gate \\w+, not promoted)\\)$`),
      );

      const report = (await call('GET', `/api/runs/${RUN}`)).body;
      expect(report).toMatchObject({
        execution: 'COMPLETED',
        status: { state: 'finished', iterations: [{ iteration: 1 }, { iteration: 2 }] },
      });
      const iterations = report.status.iterations as Array<{
        iteration: number;
        meanReward: number;
        candidate: string;
        gate: { decisionId: string; verdict: string };
      }>;
      const policies = (await call('GET', `/api/policies?runId=${RUN}`)).body.items as Array<{
        version: string;
        trainerMetrics: Record<string, number>;
      }>;
      const decisions = await Promise.all(
        iterations.map(async (i) => (await call('GET', `/api/decisions/${i.gate.decisionId}`)).body),
      );
      const ledger = (await call('GET', `/api/ledger?runId=${RUN}`)).body.items as Array<{
        kind: string;
        iteration: number;
        metrics: { tokens: number };
      }>;
      const metric = (name: string) =>
        iterations.map((i) => policies.find((p) => p.version === i.candidate)!.trainerMetrics[name]);

      // Each curve is the run's own numbers, from where Rein keeps them.
      expect(await plotted(page, 'reward')).toEqual([[1, 2], iterations.map((i) => i.meanReward)]);
      const heldout = await plotted(page, 'heldout');
      expect(heldout?.slice(0, 3)).toEqual([
        [1, 2],
        decisions.map((d) => d.record.evidence.acceptedRate.candidate),
        decisions.map((d) => d.record.evidence.acceptedRate.incumbent),
      ]);
      for (const [chart, name] of [
        ['loss', 'loss'],
        ['approxKl', 'approxKl'],
        ['clipFraction', 'clipFraction'],
        ['entropy', 'entropy'],
        ['gradNorm', 'gradNorm'],
      ] as const) {
        expect(await plotted(page, chart)).toEqual([[1, 2], metric(name)]);
      }
      await expectStepCurves(
        page,
        iterations.map((i) => policies.find((p) => p.version === i.candidate)!),
      );
      expect((await plotted(page, 'tokens'))?.[1]).toEqual(
        iterations.map(
          (i) => ledger.find((e) => e.kind === 'iteration' && e.iteration === i.iteration)!.metrics.tokens,
        ),
      );
      expect(await seriesLabels(page, 'stages')).toEqual(
        expect.arrayContaining(['rollouts', 'batch', 'update', 'heldout']),
      );
      // Each chart's y axis says what it counts.
      expect(
        await page.$eval(
          '[data-chart="stages"]',
          (e) => (e as unknown as { uplot: { axes: Array<{ label?: string }> } }).uplot.axes[1]?.label,
        ),
      ).toBe('seconds');
      const stages = await plotted(page, 'stages');
      for (const series of stages!.slice(1)) for (const seconds of series) expect(seconds).toBeGreaterThanOrEqual(0);
      // The gate's verdict per iteration, and each iteration's workflows linked into the Temporal Web UI.
      const verdicts = await page.$$eval('#iterations [data-decision]', (links) =>
        links.map((a) => [a.getAttribute('data-decision'), a.textContent]),
      );
      expect(verdicts).toEqual(iterations.map((i) => [i.gate.decisionId, i.gate.verdict.toUpperCase()]));
      const workflowLinks = await page.$$eval('#iterations a[data-workflow]', (links) =>
        links.map((a) => (a as unknown as { href: string }).href),
      );
      expect(workflowLinks).toEqual(
        expect.arrayContaining([
          expect.stringMatching(
            new RegExp(`^${TEMPORAL_UI}/namespaces/${namespace}/workflows/${RUN}-it1/[\\w-]+/history$`),
          ),
          expect.stringContaining(`/workflows/${RUN}-it2-release/`),
        ]),
      );
      await shoot(page, 'run');
      await expectZoomAndHover(page, 'reward');

      // The last iteration's decision: every check, and each held-out pair linked to its rollouts.
      const decision = decisions[1];
      await page.click(`#iterations a[data-decision="${decision.id}"]`);
      await page.waitForSelector('#pairs');
      const checks = await page.$$eval('#checks tbody tr', (rows) =>
        rows.map((r) => r.querySelector('td')?.textContent),
      );
      expect(checks).toEqual(decision.record.checks.map((c: { name: string }) => c.name));
      const pairs = (await call('GET', `/api/decisions/${decision.id}/pairs`)).body.items as Array<{
        outcome: string;
        candidate: { rolloutId: string; reward: number | null };
      }>;
      expect(pairs).toHaveLength(2);
      expect(pairs.filter((p) => p.outcome === 'gained').length).toBe(decision.record.evidence.gain?.gained ?? 0);
      expect(pairs.filter((p) => p.outcome === 'lost').length).toBe(decision.record.evidence.gain?.lost ?? 0);
      expect(await page.$$eval('#pairs [data-outcome]', (cells) => cells.map((c) => c.textContent))).toEqual(
        pairs.map((p) => p.outcome),
      );
      // The rules as a table, the raw evidence folded away: the page reads in a screen or two, not metres of JSON.
      expect(
        await page.$$eval('#rules tbody tr', (rows) => rows.map((r) => r.querySelector('td')?.textContent)),
      ).toEqual(expect.arrayContaining(['acceptReward']));
      expect(await page.$eval('details#raw-evidence', (e) => (e as unknown as { open: boolean }).open)).toBe(false);
      expect(
        await page.evaluate(() => (document as unknown as { body: { scrollHeight: number } }).body.scrollHeight),
      ).toBeLessThan(3000);
      await shoot(page, 'decision');

      const pair = pairs[0]!;
      await page.click(`#pairs a[data-rollout="${pair.candidate.rolloutId}"]`);
      await page.waitForSelector('#conversation');
      expect(page.url()).toContain(`#/rollouts/${pair.candidate.rolloutId}`);
      const rollout = (await call('GET', `/api/rollouts/${pair.candidate.rolloutId}`)).body;
      expect(rollout.rollout).toMatchObject({ id: pair.candidate.rolloutId, mode: 'eval' });
      expect(await page.$eval('[data-reward]', (e) => e.getAttribute('data-reward'))).toBe(
        String(pair.candidate.reward ?? ''),
      );
      // Whether it solved its task is the outcome (the reward against acceptReward), not its status.
      expect(rollout.outcome.accepted).toBe(
        pair.candidate.reward === null ? null : pair.candidate.reward >= rollout.outcome.acceptReward,
      );
      expect(await page.$eval('[data-accepted]', (e) => e.getAttribute('data-accepted'))).toBe(
        String(rollout.outcome.accepted),
      );
      expect(rollout.trainedIn).toBeNull(); // a held-out rollout
      // It links back to the decision it is evidence in, as the candidate's replay.
      expect(rollout.decidedIn).toEqual(
        expect.arrayContaining([{ decisionId: decision.id, side: 'candidate', verdict: decision.verdict }]),
      );
      expect(
        await page.$$eval('[data-decided-in]', (links) => links.map((a) => a.getAttribute('data-decided-in'))),
      ).toContain(decision.id);
      // The conversation as the harness saw it, each model call with its latency and policy version, and the logs.
      const roles = await page.$$eval('#conversation [data-role]', (messages) =>
        messages.map((m) => m.getAttribute('data-role')),
      );
      expect(roles[0]).toBe(rollout.calls.at(-1).requestReceived.messages[0].role);
      expect(roles.at(-1)).toBe('assistant');
      const callRows = await page.$$eval('#calls tbody tr', (rows) =>
        rows.map((r) =>
          Array.from(r.querySelectorAll('td') as ArrayLike<{ textContent: string | null }>, (td) => td.textContent),
        ),
      );
      expect(callRows.map((cells) => [cells[0], cells[2]])).toEqual(
        rollout.calls.map((c: { seq: number; policyVersion: string }) => [String(c.seq), c.policyVersion]),
      );
      expect(rollout.calls.every((c: { latencyMs: number }) => c.latencyMs >= 0)).toBe(true);
      expect(await page.$$eval('[data-log]', (logs) => logs.map((l) => l.getAttribute('data-log')))).toEqual(
        expect.arrayContaining(['harness-1.log', 'verifier.log']),
      );
      // Read from the artifact store the worker uploaded them to, as an API on another host would.
      expect(rollout.logs.map((l: { name: string; source: string }) => [l.name, l.source])).toEqual(
        expect.arrayContaining([
          ['harness-1.log', 'artifacts'],
          ['verifier.log', 'artifacts'],
        ]),
      );
      await shoot(page, 'rollout');

      // Releases and ledgers: production's history and a ledger row per iteration.
      await page.goto(`${api.url}/console/#/releases`);
      await page.waitForSelector('#ledger');
      const aliases = (await call('GET', '/api/aliases')).body;
      expect(await page.$eval('[data-production]', (e) => e.getAttribute('data-production'))).toBe(
        aliases.aliases.production ?? '',
      );
      expect(await page.$$eval('#ledger tbody tr', (rows) => rows.length)).toBe(
        (await call('GET', '/api/ledger')).body.items.length,
      );
      expect(await page.$$eval('#history tbody tr', (rows) => rows.length).catch(() => 0)).toBe(aliases.history.length);
      // What changed from one iteration's row to the next names both versions whole.
      const changes = await page.$$eval('#ledger li', (items) => items.map((i) => i.textContent ?? ''));
      expect(changes).toContain(`model: ${RUN}.v1 → ${RUN}.v2`);
      await shoot(page, 'releases');

      // The runs list links to the run.
      await page.goto(`${api.url}/console/#/runs`);
      await page.waitForSelector(`#runs [data-run="${RUN}"]`);
      await shoot(page, 'runs');
      expect(problems).toEqual([]);
      await page.close();
    },
  );

  it('browses all of the run’s rollouts, training and held-out: filtered, paged, exported, each reachable', async () => {
    type Row = { rolloutId: string; iteration: number; kind: string; reward: number | null; taskId: string };
    const everything = (await call('GET', `/api/runs/${RUN}/rollouts?limit=500`)).body as { items: Row[]; next: null };
    expect(everything.next).toBeNull();
    // Two iterations of 2 tasks × 2 samples, and their gates' replays.
    expect(everything.items.filter((r) => r.kind === 'train').map((r) => r.iteration)).toEqual([
      2, 2, 2, 2, 1, 1, 1, 1,
    ]);
    expect(everything.items.some((r) => r.kind === 'heldout')).toBe(true);
    expect(await call('GET', `/api/runs/${RUN}/rollouts?after=nonsense`)).toMatchObject({
      status: 400,
      body: { error: { code: 'invalid_cursor' } },
    });
    expect(await call('GET', '/api/runs/no-such-run/rollouts')).toMatchObject({ status: 404 });

    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(String(err)));
    await logIn(page);
    const shown = () =>
      page.$$eval('#rollouts [data-rollout]', (links) => links.map((a) => a.getAttribute('data-rollout')));
    // From the run page, every rollout on one page.
    await page.goto(`${api.url}/console/#/runs/${RUN}`);
    await page.waitForSelector('[data-rollouts]');
    await page.click('[data-rollouts]');
    await page.waitForSelector('#rollouts');
    expect(await shown()).toEqual(everything.items.map((r) => r.rolloutId));
    await shoot(page, 'rollouts');

    // Three at a time, page after page: each rollout once, in the same order.
    await page.goto(`${api.url}/console/#/runs/${RUN}/rollouts?limit=3`);
    const paged: string[] = [];
    for (;;) {
      await page.waitForSelector('#rollouts');
      paged.push(...((await shown()) as string[]));
      const next = await page.$('[data-next]');
      if (!next) break;
      const before = page.url();
      await next.click();
      await page.waitForFunction((url) => location.href !== url, {}, before);
      await page.waitForFunction(() => document.querySelector('[data-first]') !== null);
    }
    expect(paged).toEqual(everything.items.map((r) => r.rolloutId));

    // The filter form: iteration 2's training rollouts that the verifier accepted.
    await page.goto(`${api.url}/console/#/runs/${RUN}/rollouts`);
    await page.waitForSelector('form#rollout-filters');
    await page.type('form#rollout-filters input[name=iteration]', '2');
    await page.select('form#rollout-filters select[name=kind]', 'train');
    await page.type('form#rollout-filters input[name=minReward]', '1');
    await page.click('form#rollout-filters button[type=submit]');
    await page.waitForFunction(() => location.hash.includes('minReward=1'));
    await page.waitForSelector('#rollouts, [data-empty]');
    const accepted = everything.items.filter((r) => r.kind === 'train' && r.iteration === 2 && (r.reward ?? -1) >= 1);
    expect(await page.$$eval('#rollouts [data-rollout]', (links) => links.length).catch(() => 0)).toBe(accepted.length);

    // By merge cause, as the batch reports name the rollouts: the API's answer, drawn.
    await page.goto(`${api.url}/console/#/runs/${RUN}/rollouts`);
    await page.waitForSelector('form#rollout-filters');
    await page.select('form#rollout-filters select[name=mergeCause]', 'new_conversation');
    await page.click('form#rollout-filters button[type=submit]');
    await page.waitForFunction(() => location.hash.includes('mergeCause=new_conversation'));
    await page.waitForSelector('#rollouts, [data-empty]');
    const byCause = (await call('GET', `/api/runs/${RUN}/rollouts?mergeCause=new_conversation&limit=500`)).body;
    expect(byCause.items.every((r: Row) => r.kind === 'train')).toBe(true);
    expect(await page.$$eval('#rollouts [data-rollout]', (links) => links.length).catch(() => 0)).toBe(
      byCause.items.length,
    );

    // What the page shows, downloaded as CSV: a heading row and a row per rollout.
    await page.goto(`${api.url}/console/#/runs/${RUN}/rollouts?kind=heldout`);
    await page.waitForSelector('#rollouts');
    await page.click('[data-export=csv]');
    const csv = await page.$eval('[data-export=csv]', async (a) => {
      const res = await fetch((a as unknown as { href: string }).href);
      return res.text();
    });
    const lines = csv.trimEnd().split('\r\n');
    expect(lines[0]).toMatch(/^rolloutId,iteration,kind,side,taskId,sample,status,failureClass,reward,/);
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual(
      everything.items.filter((r) => r.kind === 'heldout').map((r) => r.rolloutId),
    );

    // A training rollout (which only this browser reaches) opens, and links back to its iteration's rollouts.
    const trained = everything.items.find((r) => r.kind === 'train')!;
    await page.goto(`${api.url}/console/#/runs/${RUN}/rollouts?kind=train`);
    await page.waitForSelector('#rollouts');
    await page.click(`#rollouts a[data-rollout="${trained.rolloutId}"]`);
    await page.waitForSelector('#conversation');
    await page.click(`a[href="#/runs/${RUN}/rollouts?iteration=${trained.iteration}"]`);
    await page.waitForFunction(
      (iteration) => location.hash.endsWith(`/rollouts?iteration=${iteration}`),
      {},
      trained.iteration,
    );
    await page.waitForSelector('#rollouts');

    // Its tokens as trained: the trained ones highlighted, behaviour beside trainer log-probs. (A rollout the batch
    // left out, one that failed for the infrastructure, has none: the first one the batch kept is opened.)
    const tokensOf = async (r: Row) =>
      call('GET', `/api/runs/${RUN}/iterations/${r.iteration}/tokens?rollout=${r.rolloutId}`);
    let inBatch: Row | undefined;
    for (const r of everything.items.filter((r) => r.kind === 'train'))
      if ((await tokensOf(r)).status === 200) {
        inBatch = r;
        break;
      }
    await page.goto(`${api.url}/console/#/rollouts/${inBatch!.rolloutId}`);
    await page.waitForSelector('[data-tokens]');
    await page.click('[data-tokens]');
    await page.waitForSelector('[data-sequence]');
    const tokens = (await tokensOf(inBatch!)).body as {
      trainerLogprobsMissing: string | null;
      sequences: Array<{ index: number; trainedTokens: number; tokens: unknown[] }>;
    };
    expect(tokens.trainerLogprobsMissing).toBeNull();
    const first = tokens.sequences[0]!;
    expect(await page.$$eval(`[data-sequence="${first.index}"] .token`, (t) => t.length)).toBe(first.tokens.length);
    expect(await page.$$eval(`[data-sequence="${first.index}"] .token.trained`, (t) => t.length)).toBe(
      first.trainedTokens,
    );
    const cells = await page.$$eval(`#trained-tokens-${first.index} tbody tr`, (rows) =>
      rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)),
    );
    expect(cells).toHaveLength(first.trainedTokens);
    // Behaviour and trainer log-probs are both numbers on every trained token (columns 6 and 7).
    for (const row of cells) for (const value of [row[5], row[6]]) expect(Number(value)).toBeLessThanOrEqual(0);
    await shoot(page, 'tokens');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('acts from the page through the API: pause, resume and cancel a run; promote and roll back', async () => {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(String(err)));
    await logIn(page);
    const state = (runId: string, expected: string) =>
      page.waitForSelector(`[data-state="${expected}"]`, { timeout: 60_000 }).then(async () => {
        // A run cancelled before it recorded any progress has no status yet: its execution says how it ended.
        const { body } = await call('GET', `/api/runs/${runId}`);
        expect(body.status?.state ?? body.execution.toLowerCase()).toBe(expected);
      });

    // A second run, paused once its first iteration ends, resumed, then cancelled, each from its page. It is
    // started from a config with another loss aggregation, for the comparison below to tell apart.
    const run = 'console-actions-1';
    const other: ReinConfig = { ...config, samples: { ...config.samples, lossAggregation: 'seq-mean-token-mean' } };
    await startRun(
      client,
      config.temporal.taskQueue,
      { ...trainingRunInput(other, { iterations: 3 }), runId: run },
      other,
      promotionGuard(other),
    );
    await page.goto(`${api.url}/console/#/runs/${run}`);
    await page.waitForSelector('[data-actions="running"] [data-action=pause]');
    await page.click('[data-action=pause]');
    await page.waitForSelector('#flash[data-outcome=done]');
    await state(run, 'paused');
    await page.click('[data-actions="paused"] [data-action=resume]');
    await state(run, 'running');
    // Cancelling asks first, in the page; No leaves the run as it was.
    await page.click('[data-actions="running"] [data-action=cancel]');
    expect(await page.$eval('[data-confirm]', (e) => e.textContent)).toMatch(/^Cancel run console-actions-1 now\?/);
    await page.click('[data-confirm-no]');
    await page.click('[data-actions="running"] [data-action=cancel]');
    await page.click('[data-confirm-yes]');
    await state(run, 'cancelled');
    // An ended run offers to continue it, nothing else.
    expect(await page.$$eval('[data-actions] button', (b) => b.map((e) => e.getAttribute('data-action')))).toEqual([
      'resume',
    ]);

    // Promote a candidate of the first run that production does not serve (an override when its gate refuses it).
    const before = (await call('GET', '/api/aliases')).body.aliases.production as string | undefined;
    const version = [`${RUN}.v1`, `${RUN}.v2`].find((v) => v !== before)!;
    await page.goto(`${api.url}/console/#/runs/${RUN}`);
    await page.waitForSelector(`[data-promote="${version}"]`);
    await page.click(`[data-promote="${version}"]`);
    // Refused by the gate (no passing decision against production), the page offers an override with a reason.
    await page.waitForFunction(
      (v) =>
        document.querySelector('#flash')?.textContent?.startsWith(`Production now serves ${v}`) ||
        document.querySelector(`[data-override="${v}"]`) !== null,
      {},
      version,
    );
    if (await page.$(`[data-override="${version}"]`)) {
      await page.type(`[data-override="${version}"] input[name=reason]`, 'console test: by hand');
      await page.click(`[data-override="${version}"] button`);
    }
    await page.waitForFunction(
      (v) => document.querySelector('#flash')?.textContent?.startsWith(`Production now serves ${v}`),
      {},
      version,
    );
    const promoted = (await call('GET', '/api/aliases')).body;
    expect(promoted.aliases.production).toBe(version);
    const move = promoted.history.at(-1);
    expect(move).toMatchObject({ to: version, actor: 'api' });
    // Refused by the gate, the override says so and keeps the reason given.
    if (move.override) expect(move.reason).toBe('console test: by hand');

    // And back, from the releases page, with the reason recorded.
    await page.goto(`${api.url}/console/#/releases`);
    await page.waitForSelector(`[data-rollback="${version}"]`);
    await page.click(`[data-rollback="${version}"]`);
    await page.type('[data-reason-form] input[name=reason]', 'console test: by hand');
    await page.click('[data-reason-form] button');
    await page.waitForFunction(() =>
      document.querySelector('#flash')?.textContent?.startsWith('Production rolled back'),
    );
    const back = (await call('GET', '/api/aliases')).body;
    expect(back.aliases.production).toBe(before ?? 'v0');
    expect(await page.$eval('#flash', (e) => e.textContent)).toBe(
      `Production rolled back from ${version} to ${back.aliases.production}.`,
    );
    expect(back.history.at(-1)).toMatchObject({ operation: 'rollback', actor: 'api', reason: 'console test: by hand' });
    await page.waitForSelector('#history');
    await shoot(page, 'releases-after-rollback');
    expect(problems).toEqual([]);
    await page.close();
  });

  it('lists runs a page at a time, filtered by state and by text in the id', async () => {
    const listed = async (query: string) => {
      const { body } = await call('GET', `/api/runs?${query}`);
      return [body.items.map((r: { runId: string }) => r.runId), body.total];
    };
    // The actions test's run started last.
    expect(await listed('limit=1')).toEqual([['console-actions-1'], 2]);
    expect(await listed('limit=1&offset=1')).toEqual([[RUN], 2]);
    expect(await listed('execution=CANCELLED')).toEqual([['console-actions-1'], 1]);
    expect(await listed('search=OF-TWO')).toEqual([[RUN], 1]);
    expect(await call('GET', '/api/runs?execution=SLEEPING')).toMatchObject({ status: 400 });

    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(String(err)));
    await logIn(page);
    const shown = () => page.$$eval('#runs [data-run]', (links) => links.map((a) => a.getAttribute('data-run')));
    await page.goto(`${api.url}/console/#/runs?limit=1`);
    await page.waitForSelector('[data-older]');
    expect(await shown()).toEqual(['console-actions-1']);
    await page.click('[data-older]');
    await page.waitForSelector('[data-newer]');
    expect(await shown()).toEqual([RUN]);
    expect(await page.$eval('[data-total]', (e) => e.textContent)).toBe('Runs 2–2 of 2. ');
    await page.goto(`${api.url}/console/#/runs`);
    await page.waitForSelector('form#run-filters');
    await page.select('form#run-filters select[name=execution]', 'CANCELLED');
    await page.click('form#run-filters button[type=submit]');
    await page.waitForFunction(() => location.hash === '#/runs?execution=CANCELLED&limit=20');
    await page.waitForSelector('#runs');
    expect(await shown()).toEqual(['console-actions-1']);
    expect(problems).toEqual([]);
    await page.close();
  });

  it('shows a run’s config, secrets redacted, and compares two runs: curves, config, held-out tasks', async () => {
    const { status, body } = await call('GET', `/api/runs/${RUN}/config`);
    expect(status).toBe(200);
    expect(body.configHash).toMatch(/^[0-9a-f]{16}$/);
    expect(body.config.samples.lossAggregation).toBe(config.samples.lossAggregation);
    expect(JSON.stringify(body)).not.toContain(SECRET);
    expect(body.config.harness.local.env.CALC_SERVICE_TOKEN).toMatch(/redacted/i);
    expect(await call('GET', '/api/runs/no-such-run/config')).toMatchObject({ status: 404 });

    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    const problems: string[] = [];
    page.on('pageerror', (err) => problems.push(String(err)));
    await logIn(page);
    await page.goto(`${api.url}/console/#/runs/${RUN}`);
    await page.waitForSelector('#config details');
    expect(await page.$eval('#config', (e) => e.textContent)).toContain(body.configHash);
    expect(await page.$eval('#config', (e) => e.textContent)).not.toContain(SECRET);

    // Picked on the runs page.
    await page.goto(`${api.url}/console/#/runs`);
    await page.waitForSelector('#runs');
    for (const id of [RUN, 'console-actions-1']) await page.click(`#runs input[name=compare][value="${id}"]`);
    await page.click('[data-compare]');
    await page.waitForSelector('[data-heldout-counts]');
    // In the runs list's order, newest first.
    expect(page.url()).toContain(`#/compare?runs=console-actions-1,${RUN}`);
    // Each run's curve, from its own iterations.
    const [one, two] = await Promise.all(
      ['console-actions-1', RUN].map(async (id) => (await call('GET', `/api/runs/${id}/iterations`)).body),
    );
    const rewards = await plotted(page, 'compare-reward');
    const xs = rewards![0]!;
    const byIteration = (view: { iterations: Array<{ iteration: number; meanReward: number | null }> }) =>
      xs.map((x) => view.iterations.find((i) => i.iteration === x)?.meanReward ?? null);
    expect(rewards!.slice(1)).toEqual([byIteration(one), byIteration(two)]);
    // The one setting the second run changed.
    const differs = await page.$$eval('#config-diff tbody tr', (rows) =>
      rows.map((r) =>
        Array.from(r.querySelectorAll('td') as ArrayLike<{ textContent: string | null }>, (td) => td.textContent),
      ),
    );
    expect(differs).toEqual([
      // The first run's config leaves it to its default.
      [
        '.samples.lossAggregation',
        '"seq-mean-token-mean"',
        JSON.stringify(config.samples.lossAggregation) ?? '(not set)',
      ],
    ]);
    // Held-out task samples, each run's latest candidate's result from its decision's pairs.
    // (The actions test's run was cancelled in its first iteration, before any gate: it has nothing to pair.)
    const solved = async (view: { iterations: Array<{ gate: { decisionId: string } | null }> }) => {
      const decisionId = view.iterations.findLast((i) => i.gate)?.gate?.decisionId;
      if (!decisionId) return '–';
      const pairs = (await call('GET', `/api/decisions/${decisionId}/pairs`)).body.items as Array<{ outcome: string }>;
      return String(pairs.filter((p) => p.outcome === 'both' || p.outcome === 'gained').length);
    };
    expect(await page.$eval('[data-heldout-counts]', (e) => e.getAttribute('data-heldout-counts'))).toBe(
      `${await solved(one)},${await solved(two)}`,
    );
    await shoot(page, 'compare');
    expect(problems).toEqual([]);
    await page.close();
  });
});
