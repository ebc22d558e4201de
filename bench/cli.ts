/**
 * How long a `rein` command takes to start: the compiled CLI (`node bin/rein.js … --help`, which
 * loads the command's module and exits), median of N interleaved runs per command. Baselines in
 * the same run: a bare `node` start, and `rein --help`, which loads every command's module — what
 * every command loaded before each loaded only its own.
 *
 *   npm run build && npm run bench:cli [-- --runs 9]
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg === -1 ? 9 : Number(process.argv[runsArg + 1]);
const rein = path.resolve(import.meta.dirname, '..', 'bin', 'rein.js');
const cases: Array<{ name: string; argv: string[] }> = [
  { name: 'node (bare start)', argv: ['-e', ''] },
  { name: 'rein --help (every module)', argv: [rein, '--help'] },
  ...['gateway', 'policy', 'api', 'worker', 'train', 'status', 'promote', 'gc'].map((command) => ({
    name: `rein ${command} --help`,
    argv: [rein, command, '--help'],
  })),
];

const times = new Map(cases.map((c) => [c.name, [] as number[]]));
for (let run = 0; run < RUNS; run++) {
  for (const c of cases) {
    const started = process.hrtime.bigint();
    const result = spawnSync(process.execPath, c.argv, { stdio: 'ignore' });
    if (result.status !== 0) throw new Error(`${c.name} exited ${result.status}: run \`npm run build\` first`);
    times.get(c.name)?.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const all = median(times.get('rein --help (every module)') as number[]);
console.log(`CLI start, median of ${RUNS} runs (${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)})`);
console.log('| command | median ms | vs every module |');
console.log('|---|---|---|');
for (const c of cases) {
  const m = median(times.get(c.name) as number[]);
  console.log(`| ${c.name} | ${Math.round(m)} | ${(m / all).toFixed(2)} |`);
}
