/**
 * The journal's hot path alone, without HTTP: callers, each in a rollout of its own, check their
 * rollout (getRollout) and begin and finish a call per turn, as the gateway does per request, with
 * a growing ~1.7k-token prompt. Microseconds per call (check + begin + finish), on the trace store
 * of this checkout and, with --before REF, of git REF (in .bench/before), in alternating rounds, so
 * drift in the machine's load falls on both. Each round runs in a fresh process: two stores in one
 * process measured the same code 14-19% apart at 64 callers (one's garbage is the other's pause).
 * SQLite, and PostgreSQL with --postgres.
 *
 *   npm run bench:journal -- [--before REF] [--postgres] [--rounds N]
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { CallFinish, TraceStore } from '../src/store/trace-store.js';
import { startTestPostgres } from '../test/helpers/embedded-postgres.js';
import { checkoutBefore } from './before.js';

const { values: args } = parseArgs({
  options: {
    before: { type: 'string' },
    postgres: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '5' },
    // One round in this process (the parent runs each round so): --side now|before --callers N --store FILE|URL.
    side: { type: 'string' },
    callers: { type: 'string' },
    store: { type: 'string' },
  },
});
const rounds = Number(args.rounds);
const sides = ['now', ...(args.before ? ['before'] : [])] as const;
const label = (side: string) => (side === 'now' ? 'now' : `before (${args.before})`);

/** The trace store of `side` (this checkout, or the one checked out in .bench/before) on `store`, a file or a URL. */
async function openStore(side: string, store: string): Promise<TraceStore> {
  const tree = side === 'now' ? path.resolve(import.meta.dirname, '..') : checkoutBefore(args.before!);
  const postgres = store.startsWith('postgres');
  const module = (await import(path.join(tree, `src/store/${postgres ? 'postgres' : 'sqlite'}-store.ts`))) as {
    SqliteTraceStore: new (file: string) => TraceStore;
    PostgresTraceStore: { open(url: string): Promise<TraceStore> };
  };
  return postgres ? module.PostgresTraceStore.open(store) : new module.SqliteTraceStore(store);
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

/** One round, in a process of its own: warm up, measure, print µs per call. */
async function childRound(): Promise<void> {
  const callers = Number(args.callers);
  const store = await openStore(args.side!, args.store!);
  await load(store, Math.min(callers, 8), 4); // warm-up
  const micros = await load(store, callers, callers === 1 ? 200 : 8);
  await store.close();
  process.stdout.write(`${micros}\n`);
}

/** µs per call of `side` on `store`, measured by a fresh process running this file for one round. */
function round(side: string, callers: number, store: string): number {
  const out = execFileSync(
    process.execPath,
    [...process.execArgv, import.meta.filename, '--side', side, '--callers', String(callers), '--store', store].concat(
      args.before ? ['--before', args.before] : [],
    ),
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return Number(out.trim().split('\n').at(-1));
}

async function compare(backend: string, storeFor: (side: string, n: number) => Promise<string>): Promise<string[]> {
  const rows: string[] = [];
  let n = 0;
  for (const callers of [1, 64]) {
    const times = new Map<string, number[]>(sides.map((side) => [side, []]));
    for (let r = 0; r < rounds; r++) {
      // Each round in both orders over the rounds, so neither side always runs first.
      for (const side of r % 2 === 0 ? sides : [...sides].reverse())
        times.get(side)!.push(round(side, callers, await storeFor(side, n++)));
    }
    const cells = sides.map((side) => median(times.get(side)!).toFixed(0));
    const ratio = sides.length > 1 ? ` ${(median(times.get('now')!) / median(times.get('before')!)).toFixed(2)} |` : '';
    rows.push(`| ${backend} | ${callers} | ${cells.join(' / ')} |${ratio}`);
    process.stderr.write(`${rows.at(-1)}\n`);
  }
  return rows;
}

async function main(): Promise<void> {
  if (args.before) checkoutBefore(args.before);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-bench-journal-'));
  try {
    const rows = await compare('SQLite', async (side, n) => path.join(dir, `${side}-${n}.sqlite`));
    if (args.postgres) {
      const postgres = await startTestPostgres({ durable: true });
      try {
        const admin = new pg.Client({ connectionString: postgres.adminUrl });
        await admin.connect();
        rows.push(
          ...(await compare('PostgreSQL', async (_side, n) => {
            await admin.query(`CREATE DATABASE journal_${n}`);
            return postgres.adminUrl.replace(/\/postgres$/, `/journal_${n}`);
          })),
        );
        await admin.end();
      } finally {
        await postgres.stop();
      }
    }
    console.log(
      `\nJournal hot path, µs per call (getRollout + beginCall + finishCall), median of ${rounds} rounds (each a fresh process), ${os.cpus().length} cores.\n`,
    );
    console.log(
      `| journal | concurrent callers | µs per call ${sides.map(label).join(' / ')} |${sides.length > 1 ? ' now / before |' : ''}`,
    );
    console.log(`|---|---|---|${sides.length > 1 ? '---|' : ''}`);
    for (const row of rows) console.log(row);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await (args.side ? childRound() : main());
