/**
 * The gateway's own cost, for working on it: a bare hop and the gateway in front of the same
 * upstream, measured alternately (hop, gateway, hop, gateway, …) so drifting load on a shared
 * machine hits both alike; optionally with the gateway under `node --cpu-prof`, then a summary
 * of where its CPU went (self time by function, and inclusive time of the gateway's own steps).
 *
 *   npx tsx bench/gateway-profile.ts [--profile] [--stream] [--concurrency 1,64] [--calls 2000] [--rounds 3]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load, root, startGatewayBench } from './gateway-setup.js';

const argv = process.argv.slice(2);
const option = (name: string, fallback: string) => {
  const at = argv.indexOf(`--${name}`);
  return at >= 0 ? (argv[at + 1] as string) : fallback;
};
const profile = argv.includes('--profile');
const stream = argv.includes('--stream');
const concurrencies = option('concurrency', '1,64').split(',').map(Number);
const calls = Number(option('calls', '2000'));
const rounds = Number(option('rounds', '3'));
const profDir = mkdtempSync(path.join(os.tmpdir(), 'rein-gateway-profile-'));
const bench = await startGatewayBench(profile ? { gatewayNodeArgs: ['--cpu-prof', '--cpu-prof-dir', profDir] } : {});
const { hop, viaGateway } = bench;

try {
  for (const target of [hop, viaGateway]) await load(target, stream, 16, 300); // warm-up
  for (const concurrency of concurrencies) {
    const h: Array<Awaited<ReturnType<typeof load>>> = [];
    const g: Array<Awaited<ReturnType<typeof load>>> = [];
    for (let r = 0; r < rounds; r++) {
      h.push(await load(hop, stream, concurrency, calls));
      g.push(await load(viaGateway, stream, concurrency, calls));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const f = (x: number) => x.toFixed(3);
    const m = (rows: typeof h, k: 'p50' | 'p99' | 'rps') => median(rows.map((x) => x[k]));
    console.log(
      `${stream ? 'stream' : 'non-stream'} c=${concurrency}: p50 hop ${f(m(h, 'p50'))} gw ${f(m(g, 'p50'))} added ${f(median(g.map((x, i) => x.p50 - (h[i] as typeof x).p50)))} | ` +
        `p99 hop ${f(m(h, 'p99'))} gw ${f(m(g, 'p99'))} | rps hop ${m(h, 'rps').toFixed(0)} gw ${m(g, 'rps').toFixed(0)}  ` +
        `(gw p50 per round: ${g.map((x) => f(x.p50)).join(' ')})`,
    );
  }
} finally {
  await bench.stop();
  if (profile) summarize(path.join(profDir, readdirSync(profDir)[0] as string));
  rmSync(profDir, { recursive: true, force: true });
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

/** Self time per function, and inclusive time of a few named steps, as shares of the busy time. */
function summarize(file: string): void {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as {
    nodes: ProfileNode[];
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map<number, number>();
  prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0)));
  const label = (n: ProfileNode) =>
    `${n.callFrame.functionName || '(anon)'} ${n.callFrame.url.replace(/^.*node_modules\//, '~/').replace(`file://${root}/`, '')}:${n.callFrame.lineNumber + 1}`;
  let busy = 0;
  const selfBy = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, t] of self) {
    const n = byId.get(id) as ProfileNode;
    if (n.callFrame.functionName === '(idle)' || n.callFrame.functionName === '(program)') continue;
    busy += t;
    selfBy.set(label(n), (selfBy.get(label(n)) ?? 0) + t);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const l = label(byId.get(at) as ProfileNode);
      if (!seen.has(l)) inclusive.set(l, (inclusive.get(l) ?? 0) + t);
      seen.add(l);
    }
  }
  const pct = (t: number) => `${((100 * t) / busy).toFixed(1)}%`.padStart(6);
  console.log(`\nbusy ${(busy / 1e6).toFixed(2)} s; top self time:`);
  for (const [l, t] of [...selfBy].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${pct(t)} ${l}`);
  console.log('\ninclusive (src/ and selected):');
  for (const [l, t] of [...inclusive].sort((a, b) => b[1] - a[1])) {
    if (
      /src\/|secure-json|parseJson|runPreParsing|onRequest|routeHandler|handleRequest|parserOnIncoming|emit|writeHead|end /.test(
        l,
      ) &&
      t / busy > 0.004
    )
      console.log(`${pct(t)} ${l}`);
  }
}
