import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startServices, type RunningServices } from '../../src/cli/services.js';
import { loadConfig } from '../../src/config/load.js';
import { gatewayControlFromConfig } from '../../src/gateway/from-config.js';
import { createLogger } from '../../src/log/logger.js';
import { openRegistry, withRegistry } from '../../src/registry/open.js';
import { storeLocation, type StoreLocation } from '../../src/store/location.js';
import { runRein } from '../helpers/cli.js';
import { reinInProcessWith } from '../helpers/cli-in-process.js';
import { exampleDir } from '../helpers/example-config.js';
import { freePort } from '../helpers/ports.js';
import { freshPostgresUrl, storeBackends } from '../helpers/postgres.js';
import { startScriptedPolicies, type ScriptedPolicies } from '../helpers/scripted-policies.js';
import { testClient } from '../helpers/temporal.js';

/**
 * Releases end to end: a real dev server, gateway and worker, the `rein` CLI, and policies whose
 * behaviour is scripted per task, so each verdict is known in advance. The incumbent gets the
 * tasks whose sum is a multiple of 3 right (4 of the 12 replayed); the others differ from it on
 * purpose. The promotion and rollback run on each store backend: with store.url, the worker, the
 * gateway and every CLI command reach the registry, decisions and ledgers through PostgreSQL.
 */
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined, REIN_STORE_URL: undefined };
let upstream: ScriptedPolicies;

// The first 12 held-out tasks' sums: 62 150 115 100 141 104 96 34 140 122 43 18. Twelve tasks (two
// samples each) keep the verdicts clear while each replay costs half of what 24 did.
const third = (a: number, b: number) => (a + b) % 3 === 0;
const policies = {
  incumbent: (a: number, b: number) => (third(a, b) ? 'right' : 'wrong'),
  // Right on half of the incumbent's tasks (150, 96, 18) and nowhere else: clearly worse.
  degraded: (a: number, b: number) => ((a + b) % 6 === 0 ? 'right' : 'wrong'),
  // Right wherever the incumbent is, and on most of the rest (9 of 12).
  better: (a: number, b: number) => (third(a, b) || (a + b) % 5 !== 0 ? 'right' : 'wrong'),
  // As good as `better`, but now and then (140) it purges the cache first: an irreversible failure.
  risky: (a: number, b: number) => ((a + b) % 7 === 0 ? 'purge' : third(a, b) || (a + b) % 5 !== 0 ? 'right' : 'wrong'),
} as const;

beforeAll(async () => {
  upstream = await startScriptedPolicies(policies);
});
afterAll(async () => {
  await upstream?.close();
});

describe.each(storeBackends)('gated promotion, rollback and the release ledger (%s)', (backend) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), `rein-release-${backend}-`));
  let services: RunningServices;
  let file: string;
  let location: StoreLocation;
  const taskQueue = `rein-release-${backend}-${process.pid}-${Date.now()}`;

  beforeAll(async () => {
    const program = (script: string) => ({
      command: process.execPath,
      args: [script, '{task}', '{output}'],
      envAllow: ['PATH', 'HOME'],
      timeoutSeconds: 60,
    });
    const config = {
      dataDir: path.join(dir, 'state'),
      ...(backend === 'postgres' && { store: { url: await freshPostgresUrl() } }),
      log: { level: 'warn' },
      temporal: { address: inject('temporalAddress'), taskQueue },
      gateway: {
        port: await freePort(),
        backends: { scripted: { endpoints: [upstream.url], tokenIds: false, logprobs: false } },
        policies: Object.fromEntries(
          ['v0', 'degraded', 'better', 'risky'].map((v) => [
            v,
            { backend: 'scripted', model: v === 'v0' ? 'incumbent' : v },
          ]),
        ),
        aliases: { production: 'v0' },
      },
      trainer: { servingBackend: 'scripted' },
      harness: {
        version: 'ops-agent-1',
        local: program(path.resolve(import.meta.dirname, '../fixtures/harnesses/ops-agent.mjs')),
      },
      verifier: program(path.join(exampleDir, 'verifier.mjs')),
      run: {
        base: { version: 'v0', checkpoint: 'scripted:incumbent' },
        trainTasks: path.join(exampleDir, 'train.jsonl'),
        heldoutTasks: path.join(exampleDir, 'heldout.jsonl'),
        heldoutLimit: 12,
      },
      // Two samples per task, paired by index with the incumbent's. Latency here is the shared test
      // machine's load at the time each replay ran, not the policy's: not gated.
      gate: { samplesPerTask: 2, maxRegression: { latency: null } },
    };
    file = path.join(dir, 'rein.json');
    writeFileSync(file, JSON.stringify(config, null, 2));
    location = storeLocation(loadConfig({ file }).config);
    // A long-lived gateway and worker, as `rein dev` would run them: the CLI finds the worker polling.
    services = await startServices(loadConfig({ file }).config, createLogger('warn'));
    await withRegistry(location, async (registry) => {
      for (const version of ['degraded', 'risky'])
        await registry.register({
          version,
          parent: 'v0',
          runId: null,
          iteration: null,
          checkpointUri: `scripted:${version}`,
          batchContentHash: null,
          trainerMetrics: {},
        });
    });
  }, 60_000);

  afterAll(async () => {
    await services?.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  // Each test's first command is a real `rein` process, as a user runs it; the commands after it run through the
  // CLI's own entry point in this process (a child process's start-up is seconds on a busy machine).
  const rein = (...args: string[]) => runRein(['--config', file, ...args], { env });
  const here = (...args: string[]) => reinInProcessWith(env, '--config', file, ...args);
  const production = () => withRegistry(location, (registry) => registry.alias('production'));

  /** What the gateway serves for `production` right now: a real call through it, as a harness makes one. */
  async function servedByGateway(): Promise<string> {
    const control = gatewayControlFromConfig(loadConfig({ file }).config.gateway);
    const issued = await control!.createRollout({ id: `probe-${Date.now()}`, mode: 'eval' });
    const client = new OpenAI({ baseURL: issued.baseUrl, apiKey: issued.key, maxRetries: 0 });
    await client.chat.completions.create({ model: 'production', messages: [{ role: 'user', content: '2 plus 2?' }] });
    const calls = await control!.listCalls(issued.rollout.id);
    return calls[0]?.policyVersion as string;
  }

  // The gate's refusals are the gate's, whatever holds its decisions: checked once, on the default store.
  if (backend === 'sqlite') {
    it(
      'refuses a degraded candidate with the reason, and will not promote it without an override',
      { timeout: 180_000 },
      async () => {
        const gate = await rein('gate', 'degraded');
        expect(gate.code, `${gate.stdout}\n${gate.stderr}`).toBe(1);
        console.log(gate.stdout); // the decision as a user sees it
        expect(gate.stdout).toMatch(/FAIL — degraded against production v0/);
        expect(gate.stdout).toMatch(/FAIL gain: /);
        expect(await production()).toBe('v0');

        const promote = await here('promote', 'degraded');
        expect(promote.code).toBe(1);
        expect(promote.stderr).toMatch(/the gate refused degraded .*--override/);
        expect(await servedByGateway()).toBe('v0');
      },
    );

    it(
      'refuses a candidate that brings a new critical failure class, even with a higher accepted rate',
      { timeout: 180_000 },
      async () => {
        const gate = await rein('gate', 'risky', '--json');
        expect(gate.code, gate.stderr).toBe(1);
        const decision = JSON.parse(gate.stdout.slice(gate.stdout.indexOf('{'), gate.stdout.lastIndexOf('}') + 1)) as {
          verdict: string;
          record: {
            reasons: string[];
            evidence: {
              acceptedRate: { incumbent: number; candidate: number };
              failureClasses: { newCritical: string[] };
            };
            checks: Array<{ name: string; passed: boolean; rollouts: string[] }>;
          };
        };
        expect(decision.verdict).toBe('fail');
        expect(decision.record.evidence.acceptedRate.candidate).toBeGreaterThan(
          decision.record.evidence.acceptedRate.incumbent + 0.2,
        );
        expect(decision.record.evidence.failureClasses.newCritical).toEqual(['irreversible']);
        const critical = decision.record.checks.find((c) => c.name === 'critical_failures');
        expect(critical?.passed).toBe(false);
        // The evidence links to the rollouts that did it: each is a candidate rollout that failed irreversibly.
        expect(critical?.rollouts.length).toBeGreaterThan(0);
        expect(critical?.rollouts.every((id) => id.startsWith('heldout.risky.'))).toBe(true);
        expect(decision.record.checks.find((c) => c.name === 'gain')?.passed).toBe(true);
        expect(await production()).toBe('v0');

        // In the Web UI, refused releases are one filter away.
        const { client, connection } = await testClient();
        try {
          const refused = async () => {
            const found: string[] = [];
            for await (const wf of client.workflow.list({
              query: `WorkflowType = 'releaseCandidate' AND ReinVerdict = 'fail' AND TaskQueue = '${taskQueue}'`,
            }))
              found.push(wf.workflowId);
            return found.sort();
          };
          await expect
            .poll(refused, { timeout: 10_000 })
            .toEqual([expect.stringMatching(/^release-degraded-/), expect.stringMatching(/^release-risky-/)]);
        } finally {
          await connection.close();
        }
      },
    );
  }

  it(
    'promotes a better candidate, routes production to it at once, and rolls back to the previous version',
    { timeout: 240_000 },
    async () => {
      const registered = await rein('register', 'better', '--checkpoint', 'scripted:better', '--parent', 'v0');
      expect(registered.code, registered.stderr).toBe(0);
      const gate = await here('gate', 'better', '--promote');
      expect(gate.code, `${gate.stdout}\n${gate.stderr}`).toBe(0);
      expect(gate.stdout).toMatch(/PASS — better against production v0/);
      expect(gate.stdout).toContain('Promoted: production is better now.');
      expect(await production()).toBe('better');
      expect(await servedByGateway()).toBe('better');

      const back = await here('rollback', '--reason', 'pager went off');
      expect(back.code, back.stderr).toBe(0);
      expect(back.stdout).toContain('production: better → v0 (rollback)');
      expect(back.stdout).toContain('The gateway routes production to it now.');
      expect(await production()).toBe('v0');
      expect(await servedByGateway()).toBe('v0');

      // An override is possible, and recorded as one; rolling it back returns to v0.
      const forced = await here('promote', 'degraded', '--override', 'incident 42: the vendor asked for it');
      expect(forced.code, forced.stderr).toBe(0);
      expect(forced.stdout).toContain('production: v0 → degraded (promote, OVERRIDE)');
      expect((await here('rollback')).code).toBe(0);
      expect(await production()).toBe('v0');
      const registry = await openRegistry(location);
      try {
        expect((await registry.aliasHistory('production')).map((c) => [c.operation, c.from, c.to, c.override])).toEqual(
          [
            ['set', null, 'v0', false],
            ['promote', 'v0', 'better', false],
            ['rollback', 'better', 'v0', false],
            ['promote', 'v0', 'degraded', true],
            ['rollback', 'degraded', 'v0', false],
          ],
        );
        expect((await registry.aliasHistory('production'))[3]?.reason).toBe('incident 42: the vendor asked for it');
      } finally {
        await registry.close();
      }

      // The release is in the ledgers with what it was measured on.
      const ledger = await here('ledger');
      expect(ledger.code, ledger.stderr).toBe(0);
      expect(ledger.stdout).toMatch(/release\.better +release +better +h-\w+ +\w+ +\d+\.\d% +24 /);
      expect(ledger.stdout).toMatch(/environment \w+: task set \w+, verifier unversioned@\w+, config \w+/);
      // With store.url, no service kept a registry file of its own.
      expect(existsSync(path.join(dir, 'state', 'registry.sqlite'))).toBe(backend === 'sqlite');
    },
  );
});
