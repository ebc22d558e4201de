/**
 * Where a process's CPU went, from the profiles `npm run bench:scale -- --profile DIR` writes:
 * self time by function (top 25) and by source file, as shares of the profile's busy time.
 *
 *   npx tsx bench/scale-profile.ts DIR/worker-0.cpuprofile
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const file = process.argv[2];
if (!file) throw new Error('give the .cpuprofile file to read');
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<number, number>();
profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

const idle = new Set(['(idle)', '(program)']);
const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
let busy = 0;
for (const [id, us] of selfUs) {
  const frame = (byId.get(id) as ProfileNode).callFrame;
  if (idle.has(frame.functionName)) continue;
  busy += us;
  const where = frame.url.replace(/^file:\/\//, '').replace(/^.*\/node_modules\//, 'node_modules/');
  const short = where.replace(/^.*\/scale-dist\//, '');
  const name = `${frame.functionName || '(anonymous)'} ${short}:${frame.lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + us);
  byFile.set(short || frame.functionName, (byFile.get(short || frame.functionName) ?? 0) + us);
}
const top = (m: Map<string, number>, n: number) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => ({ share: +(us / busy).toFixed(3), ms: Math.round(us / 1000), where: k }));
console.log(
  JSON.stringify(
    { busyMs: Math.round(busy / 1000), byFunction: top(byFunction, 25), byFile: top(byFile, 25) },
    null,
    2,
  ),
);
