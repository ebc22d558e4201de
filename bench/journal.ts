/**
 * The journal's hot path alone, without HTTP: callers, each in a rollout of its own, check their
 * rollout (getRollout) and begin and finish a call per turn, as the gateway does per request, with
 * a growing ~1.7k-token prompt. Microseconds per call (check + begin + finish), on the trace store
 * of this checkout and, with --before REF, of git REF (in .bench/before), in alternating rounds in
 * one process, so drift in the machine's load falls on both. SQLite, and PostgreSQL with --postgres.
 *
 *   npm run bench:journal -- [--before REF] [--postgres] [--rounds N]
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import { PostgresTraceStore } from '../src/store/postgres-store.js';
import type { CallFinish, TraceStore } from '../src/store/trace-store.js';
import { startTestPostgres } from '../test/helpers/embedded-postgres.js';
import { checkoutBefore } from './before.js';

const { values: args } = parseArgs({
  options: {
    before: { type: 'string' },
    postgres: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '5' },
  },
});
const rounds = Number(args.rounds);
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-journal-'));

interface Opener {
  name: string;
  sqlite(file: string): TraceStore;
  postgres(url: string): Promise<TraceStore>;
}
const openers: Opener[] = [
  { name: 'now', sqlite: (file) => new SqliteTraceStore(file), postgres: (url) => PostgresTraceStore.open(url) },
];
if (args.before) {
  const tree = checkoutBefore(args.before);
  const sqlite = (await import(path.join(tree, 'src/store/sqlite-store.ts'))) as {
    SqliteTraceStore: new (file: string) => TraceStore;
  };
  const postgres = (await import(path.join(tree, 'src/store/postgres-store.ts'))) as {
    PostgresTraceStore: { open(url: string): Promise<TraceStore> };
  };
  openers.push({
    name: `before (${args.before})`,
    sqlite: (file) => new sqlite.SqliteTraceStore(file),
    postgres: (url) => postgres.PostgresTraceStore.open(url),
  });
}

const finish = (promptIds: number[], completionIds: number[]): CallFinish => ({
  response: { choices: [{ message: { role: 'assistant', content: 'x'.repeat(40) } }] },
  promptIds,
  choices: [{ completionIds, logprobs: completionIds.map(() => -0.5), finishReason: 'stop' }],
  usage: { prompt_tokens: promptIds.length, completion_tokens: completionIds.length },
  upstreamStatus: 200,
  errorClass: null,
  errorMessage: null,
  ttftMs: 1,
  latencyMs: 2,
});

/** `callers` rollouts of `turns` calls each, all at once; microseconds per call. */
async function load(store: TraceStore, callers: number, turns: number): Promise<number> {
  const tag = randomUUID().slice(0, 8);
  await Promise.all(Array.from({ length: callers }, (_, i) => store.createRollout({ id: `${tag}-${i}` })));
  const started = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async (_, i) => {
      const rolloutId = `${tag}-${i}`;
      let prompt = Array.from({ length: 1700 }, (_, t) => (t * 7 + i) % 150_000);
      const messages = [{ role: 'system', content: 'You solve tasks with tools. '.repeat(20) }];
      for (let t = 0; t < turns; t++) {
        if (!(await store.getRollout(rolloutId))) throw new Error('rollout missing');
        messages.push({ role: 'user', content: `tool result ${t}: ${'x'.repeat(200)}` });
        const request = { model: 'production', messages };
        const id = `${rolloutId}-${t}`;
        await store.beginCall({
          id,
          rolloutId,
          attempt: 1,
          endpoint: 'chat.completions',
          policyVersion: 'v1',
          backendUrl: 'http://b',
          stream: false,
          requestReceived: request,
          requestSent: request,
          startedAt: Date.now(),
        });
        const completion = Array.from({ length: 10 }, (_, k) => (k + t) % 150_000);
        await store.finishCall(id, finish(prompt, completion));
        messages.push({ role: 'assistant', content: 'x'.repeat(40) });
        prompt = [...prompt, ...completion, ...Array.from({ length: 20 }, (_, k) => k)];
      }
    }),
  );
  return ((performance.now() - started) * 1000) / (callers * turns);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

async function compare(backend: string, open: (opener: Opener, n: number) => Promise<TraceStore>): Promise<string[]> {
  const rows: string[] = [];
  for (const callers of [1, 64]) {
    const turns = callers === 1 ? 200 : 8;
    const times = new Map<string, number[]>(openers.map((o) => [o.name, []]));
    for (let round = 0; round < rounds; round++) {
      // Each round in both orders over the rounds, so neither side always runs first.
      const order = round % 2 === 0 ? openers : [...openers].reverse();
      for (const opener of order) {
        const store = await open(opener, round);
        await load(store, Math.min(callers, 8), 4); // warm-up
        times.get(opener.name)!.push(await load(store, callers, turns));
        await store.close();
      }
    }
    const cells = openers.map((o) => median(times.get(o.name)!).toFixed(0));
    const ratio =
      openers.length > 1
        ? ` ${(median(times.get(openers[0]!.name)!) / median(times.get(openers[1]!.name)!)).toFixed(2)} |`
        : '';
    rows.push(`| ${backend} | ${callers} | ${cells.join(' / ')} |${ratio}`);
    process.stderr.write(`${rows.at(-1)}\n`);
  }
  return rows;
}

try {
  const rows = await compare('SQLite', async (opener, round) =>
    opener.sqlite(path.join(dir, `${opener.name.replace(/\W/g, '')}-${round}.sqlite`)),
  );
  if (args.postgres) {
    const postgres = await startTestPostgres({ durable: true });
    try {
      const admin = new pg.Client({ connectionString: postgres.adminUrl });
      await admin.connect();
      let n = 0;
      rows.push(
        ...(await compare('PostgreSQL', async (opener) => {
          const name = `journal_${n++}`;
          await admin.query(`CREATE DATABASE ${name}`);
          return opener.postgres(postgres.adminUrl.replace(/\/postgres$/, `/${name}`));
        })),
      );
      await admin.end();
    } finally {
      await postgres.stop();
    }
  }
  console.log(
    `\nJournal hot path, µs per call (getRollout + beginCall + finishCall), median of ${rounds} rounds, ${os.cpus().length} cores.\n`,
  );
  console.log(
    `| journal | concurrent callers | µs per call ${openers.map((o) => o.name).join(' / ')} |${openers.length > 1 ? ' now / before |' : ''}`,
  );
  console.log(`|---|---|---|${openers.length > 1 ? '---|' : ''}`);
  for (const row of rows) console.log(row);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
