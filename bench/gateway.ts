/**
 * Gateway overhead: latency (p50, p99) and throughput of calls through the gateway versus straight
 * to the same upstream, measured in one run, streaming and not, at several concurrencies, with
 * the journal on. Also the journal's bytes per call for a long multi-turn rollout.
 *
 *   npm run bench:gateway [-- --quick]
 */
import os from 'node:os';
import path from 'node:path';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import { load, startGatewayBench } from './gateway-setup.js';

const quick = process.argv.includes('--quick');
const bench = await startGatewayBench();
const { dir, gatewayUrl, direct, hop: bareProxy, viaGateway, admin } = bench;

try {
  const scale = quick ? 0.2 : 1;
  const scenarios = [
    { concurrency: 1, total: Math.round(600 * scale) },
    { concurrency: 64, total: Math.round(3000 * scale) },
    { concurrency: 256, total: Math.round(4000 * scale) },
  ];
  const rows: string[] = [];
  for (const stream of [false, true]) {
    for (const { concurrency, total } of scenarios) {
      for (const target of [direct, bareProxy, viaGateway]) await load(target, stream, Math.min(concurrency, 16), 100); // warm-up
      const d = await load(direct, stream, concurrency, total);
      const b = await load(bareProxy, stream, concurrency, total);
      const g = await load(viaGateway, stream, concurrency, total);
      const ms = (x: number) => x.toFixed(2);
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
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: 'You solve tasks with tools. '.repeat(20) }];
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
  console.log('Each cell: direct / bare proxy hop / Rein gateway. "vs direct" is what a harness pays; "vs hop" is what the gateway adds over the cheapest possible proxy.\n');
  console.log('| mode | concurrency | calls | p50 ms | added p50 vs direct | added p50 vs hop | p99 ms | added p99 vs direct | added p99 vs hop | req/s | rps ratio vs direct | rps ratio vs hop |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  console.log(
    `\nJournal for a ${turns}-turn rollout (last prompt ${lastPromptTokens} tokens): ${(bytes / turns / 1024).toFixed(1)} KiB per call in all ` +
      `(requests as received and as sent, response, token ids, log-probs); the prompt token ids alone, stored whole, ` +
      `would take ${(tokenBytesIfWhole / turns / 1024).toFixed(1)} KiB per call.`,
  );
} finally {
  await bench.stop();
}
