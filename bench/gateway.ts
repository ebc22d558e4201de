/**
 * Gateway overhead: latency (p50, p99) and throughput of calls through the gateway versus straight
 * to the same upstream, measured in one run, streaming and not, at several concurrencies, with
 * the journal on; with --before REF, also through the gateway of git REF in the same run. Also the
 * journal's bytes per call for a long multi-turn rollout, and redaction's cost on 1 MiB texts
 * built to stall a backtracking engine. And the journal on PostgreSQL (one gateway, and two on one
 * database taking calls in turn) against SQLite, in the same run (--skip-postgres leaves it out).
 * Gateways run compiled, as users run them. `--before HEAD` (the same code on both sides) shows how
 * far apart identical gateways come out: the noise a before/after ratio must beat.
 *
 *   npm run bench:gateway [-- --quick] [-- --before REF] [-- --skip-postgres]
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DEFAULT_REDACTION_RULES, redactText } from '../src/gateway/redact.js';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import pg from 'pg';
import { type Pool } from 'undici';
import { startTestPostgres } from '../test/helpers/embedded-postgres.js';
import { ADVERSARIAL_UNITS, repeatedTo } from '../test/helpers/redaction-adversarial.js';
import { checkoutBefore } from './before.js';
import { load, root, startGateway, startGatewayBench, type GatewayBench, type Target } from './gateway-setup.js';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    before: { type: 'string' },
    'skip-postgres': { type: 'boolean', default: false },
  },
});
const quick = args.quick;
const bench = await startGatewayBench({ beforeTree: args.before ? checkoutBefore(args.before) : undefined });
const { dir, gatewayUrl, direct, hop: bareProxy, viaGateway, viaBefore, admin } = bench;

try {
  const scale = quick ? 0.2 : 1;
  const scenarios = [
    { concurrency: 1, total: Math.round(600 * scale) },
    { concurrency: 64, total: Math.round(3000 * scale) },
    { concurrency: 256, total: Math.round(4000 * scale) },
  ];
  const rows: string[] = [];
  const beforeRows: string[] = [];
  const ms = (x: number) => x.toFixed(2);
  for (const stream of [false, true]) {
    for (const { concurrency, total } of scenarios) {
      const targets: Target[] = [direct, bareProxy, viaGateway, ...(viaBefore ? [viaBefore] : [])];
      for (const target of targets) await load(target, stream, Math.min(concurrency, 16), 100); // warm-up
      const d = await load(direct, stream, concurrency, total);
      const b = await load(bareProxy, stream, concurrency, total);
      // Before and after alternate, in halves, so drift in the machine's load falls on both.
      const [g1, o1] = viaBefore
        ? [
            await load(viaGateway, stream, concurrency, total / 2),
            await load(viaBefore, stream, concurrency, total / 2),
          ]
        : [await load(viaGateway, stream, concurrency, total)];
      const [o2, g2] = viaBefore
        ? [
            await load(viaBefore, stream, concurrency, total / 2),
            await load(viaGateway, stream, concurrency, total / 2),
          ]
        : [];
      const g = g2 ? mean(g1, g2) : g1;
      if (o1 && o2) {
        const o = mean(o1, o2);
        beforeRows.push(
          `| ${stream ? 'stream' : 'non-stream'} | ${concurrency} | ${total} | ${ms(o.p50 - b.p50)} / ${ms(g.p50 - b.p50)} | ${ms(o.p99 - b.p99)} / ${ms(g.p99 - b.p99)} | ${o.rps.toFixed(0)} / ${g.rps.toFixed(0)} | ${(g.rps / o.rps).toFixed(2)} |`,
        );
        process.stderr.write(`${beforeRows.at(-1)}\n`);
      }
      rows.push(
        `| ${stream ? 'stream' : 'non-stream'} | ${concurrency} | ${total} | ${ms(d.p50)} / ${ms(b.p50)} / ${ms(g.p50)} | ${ms(g.p50 - d.p50)} | ${ms(g.p50 - b.p50)} | ` +
          `${ms(d.p99)} / ${ms(b.p99)} / ${ms(g.p99)} | ${ms(g.p99 - d.p99)} | ${ms(g.p99 - b.p99)} | ${d.rps.toFixed(0)} / ${b.rps.toFixed(0)} / ${g.rps.toFixed(0)} | ${(g.rps / d.rps).toFixed(2)} | ${(g.rps / b.rps).toFixed(2)} |`,
      );
      process.stderr.write(`${rows.at(-1)}\n`);
    }
  }

  // A long multi-turn rollout: each turn resends the whole conversation plus a tool result.
  const turns = 100;
  const long = await admin('/api/rollouts', { id: 'long-rollout' });
  const messages: Array<{ role: string; content: string }> = [
    { role: 'system', content: 'You solve tasks with tools. '.repeat(20) },
  ];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'user', content: `tool result for step ${t}: ${'x'.repeat(200)}` });
    const res = await fetch(`${gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${long.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'production', messages }),
    });
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    messages.push({ role: 'assistant', content: body.choices[0]?.message.content ?? '' });
  }
  const store = new SqliteTraceStore(path.join(dir, 'data', 'traces.sqlite'));
  const calls = await store.listCalls('long-rollout');
  const { bytes } = await store.rolloutFootprint('long-rollout');
  const tokenBytesIfWhole = calls.reduce((s, c) => s + (c.promptIds?.length ?? 0) * 4, 0);
  const lastPromptTokens = calls.at(-1)?.promptIds?.length ?? 0;
  await store.close();

  console.log(`\nGateway vs direct, ${os.cpus().length} cores, journal on (SQLite WAL). Latency in ms.\n`);
  console.log(
    'Each cell: direct / bare proxy hop / Rein gateway. "vs direct" is what a harness pays; "vs hop" is what the gateway adds over the cheapest possible proxy.\n',
  );
  console.log(
    '| mode | concurrency | calls | p50 ms | added p50 vs direct | added p50 vs hop | p99 ms | added p99 vs direct | added p99 vs hop | req/s | rps ratio vs direct | rps ratio vs hop |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  if (beforeRows.length > 0) {
    console.log(
      `\nThe gateway before (${args.before}) and now, same upstream and load, alternating. Added latency is over the bare hop, in ms.\n`,
    );
    console.log(
      '| mode | concurrency | calls | added p50 before / now | added p99 before / now | req/s before / now | rps ratio now / before |',
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const row of beforeRows) console.log(row);
  }
  console.log(
    `\nJournal for a ${turns}-turn rollout (last prompt ${lastPromptTokens} tokens): ${(bytes / turns / 1024).toFixed(1)} KiB per call in all ` +
      `(requests as received and as sent, response, token ids, log-probs); the prompt token ids alone, stored whole, ` +
      `would take ${(tokenBytesIfWhole / turns / 1024).toFixed(1)} KiB per call.`,
  );
  console.log(`\n${redactionCost()}`);
  if (!args['skip-postgres']) console.log(`\n${await postgresJournal(bench, scenarios.slice(1))}`);
} finally {
  await bench.stop();
}

/**
 * The journal on PostgreSQL: one gateway, and two on the same database with calls spread over
 * them in turn (as behind a load balancer), against the SQLite gateway, each caller in its own
 * rollout (as harnesses are). PostgreSQL runs with its durable defaults (fsync, synchronous
 * commit), SQLite in WAL with synchronous NORMAL.
 */
async function postgresJournal(
  bench: GatewayBench,
  scenarios: Array<{ concurrency: number; total: number }>,
): Promise<string> {
  const { a, b, stop } = await startPostgresGateways(bench);
  const rows: string[] = [];
  try {
    for (const stream of [false, true]) {
      for (const { concurrency, total } of scenarios) {
        const tag = `${stream ? 's' : 'n'}${concurrency}`;
        const sqlite: Target = {
          ...bench.viaGateway,
          rolloutKeys: await rolloutKeysOf(bench, `sqlite-${tag}`, concurrency),
        };
        const one: Target = { ...a.target, rolloutKeys: await rolloutKeysOf(a, `pg1-${tag}`, concurrency) };
        const two: Target = {
          ...a.target,
          pool: [a.target.pool as Pool, b.target.pool as Pool],
          rolloutKeys: await rolloutKeysOf(a, `pg2-${tag}`, concurrency),
        };
        for (const target of [sqlite, one, two]) await load(target, stream, Math.min(concurrency, 16), 100); // warm-up
        // In halves, each order once, so drift in the machine's load falls on all three.
        const halves = [
          await load(sqlite, stream, concurrency, total / 2),
          await load(one, stream, concurrency, total / 2),
          await load(two, stream, concurrency, total / 2),
        ];
        const back = [
          await load(two, stream, concurrency, total / 2),
          await load(one, stream, concurrency, total / 2),
          await load(sqlite, stream, concurrency, total / 2),
        ].reverse();
        const [s, p1, p2] = halves.map((h, i) => mean(h, back[i] as typeof h)) as [
          ReturnType<typeof mean>,
          ReturnType<typeof mean>,
          ReturnType<typeof mean>,
        ];
        const ms = (x: number) => x.toFixed(1);
        rows.push(
          `| ${stream ? 'stream' : 'non-stream'} | ${concurrency} | ${total} | ${s.rps.toFixed(0)} / ${p1.rps.toFixed(0)} / ${p2.rps.toFixed(0)} | ${(p1.rps / s.rps).toFixed(2)} | ${(p2.rps / s.rps).toFixed(2)} | ${ms(s.p50)} / ${ms(p1.p50)} / ${ms(p2.p50)} | ${ms(s.p99)} / ${ms(p1.p99)} / ${ms(p2.p99)} |`,
        );
        process.stderr.write(`${rows.at(-1)}\n`);
      }
    }
  } finally {
    await stop();
  }
  return [
    `Journal on PostgreSQL ${os.cpus().length} cores, every process on this machine (upstream, gateways, PostgreSQL, load): req/s and latency (ms) of SQLite / PostgreSQL with one gateway / PostgreSQL with two gateways taking calls in turn; each caller its own rollout.`,
    '',
    '| mode | concurrency | calls | req/s SQLite / PG 1 gw / PG 2 gw | PG 1 gw / SQLite | PG 2 gw / SQLite | p50 | p99 |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

/**
 * Two gateways on one new database of a PostgreSQL with its durable defaults, sharing the bench's
 * upstream and one secret (so a rollout key from either works on both); stop() ends all three.
 */
async function startPostgresGateways(bench: GatewayBench) {
  const postgres = await startTestPostgres({ durable: true });
  const admin = new pg.Client({ connectionString: postgres.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE bench');
  await admin.end();
  const storeUrl = postgres.adminUrl.replace(/\/postgres$/, '/bench');
  const secretFile = path.join(bench.dir, 'shared-secret');
  const [a, b] = [
    await startGateway(root, path.join(bench.dir, 'pg-a'), bench.upstreamUrl, [], { storeUrl, secretFile }),
    await startGateway(root, path.join(bench.dir, 'pg-b'), bench.upstreamUrl, [], { storeUrl, secretFile }),
  ];
  const stop = async () => {
    for (const gateway of [a, b]) {
      const exited = new Promise((r) => gateway.child.once('exit', r));
      gateway.child.kill('SIGTERM');
      await exited;
    }
    await postgres.stop();
  };
  return { a, b, stop };
}

/** The keys of n new rollouts, `prefix-0` on: one per caller, as each harness has its own. */
async function rolloutKeysOf(
  gateway: { admin: (route: string, body: unknown) => Promise<any> },
  prefix: string,
  n: number,
): Promise<string[]> {
  return Promise.all(
    Array.from(
      { length: n },
      async (_, i) => ((await gateway.admin('/api/rollouts', { id: `${prefix}-${i}` })) as { key: string }).key,
    ),
  );
}

function mean(a: { p50: number; p99: number; rps: number }, b: { p50: number; p99: number; rps: number }) {
  return { p50: (a.p50 + b.p50) / 2, p99: (a.p99 + b.p99) / 2, rps: (a.rps + b.rps) / 2 };
}

/**
 * Redaction of 1 MiB of each default rule's adversarial text (its prefix or near-misses repeated),
 * against the same rules over 1 MiB of ordinary prose in the same run.
 */
function redactionCost(): string {
  const MiB = 1024 * 1024;
  const timed = (text: string) => {
    redactText(text, DEFAULT_REDACTION_RULES); // warm-up
    const started = performance.now();
    redactText(text, DEFAULT_REDACTION_RULES);
    return performance.now() - started;
  };
  const prose = timed(repeatedTo('The quick brown fox jumps over the lazy dog; tools said ok. ', MiB));
  const lines = [
    'Redaction, every default rule over 1 MiB, ms (ratio to 1 MiB of prose, ' + `${prose.toFixed(1)} ms):`,
    '',
  ];
  lines.push('| rule | adversarial unit | ms | ratio to prose |', '|---|---|---|---|');
  let worst = 0;
  for (const [rule, units] of Object.entries(ADVERSARIAL_UNITS)) {
    for (const unit of units) {
      const took = timed(repeatedTo(unit, MiB));
      worst = Math.max(worst, took);
      lines.push(
        `| ${rule} | \`${unit.length > 24 ? `${unit.slice(0, 21)}…` : unit}\` | ${took.toFixed(1)} | ${(took / prose).toFixed(1)} |`,
      );
    }
  }
  lines.push('', `Worst: ${worst.toFixed(1)} ms per MiB, ${(worst / prose).toFixed(1)}× prose.`);
  return lines.join('\n');
}
