#!/usr/bin/env node
// Generates the example task sets deterministically: arithmetic word problems that need the
// calculator (one or two calls). `node tasks.mjs` rewrites train.jsonl and heldout.jsonl; their
// SHA-256 hashes pin them.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

const here = path.dirname(new URL(import.meta.url).pathname);

function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const templates = [
  (a, b) => ({ question: `${a} plus ${b}?`, answer: a + b }),
  (a, b) => ({ question: `${a} times ${b}?`, answer: a * b }),
  (a, b) => ({ question: `${a} minus ${b}?`, answer: a - b }),
  (a, b) => ({ question: `${a} apples and ${b} more?`, answer: a + b }),
];

export function generate(seed, count, prefix) {
  const rnd = random(seed);
  const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
  return Array.from({ length: count }, (_, i) => {
    const t = templates[int(0, templates.length - 1)];
    return { id: `${prefix}-${i}`, ...t(int(2, 99), int(2, 99)) };
  });
}

export function hashOf(tasks) {
  return createHash('sha256')
    .update(tasks.map((t) => JSON.stringify(t)).join('\n'))
    .digest('hex');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const [name, seed, count] of [
    ['train', 1, 512],
    ['heldout', 2, 128],
  ]) {
    const tasks = generate(seed, count, name);
    writeFileSync(path.join(here, `${name}.jsonl`), `${tasks.map((t) => JSON.stringify(t)).join('\n')}\n`);
    process.stdout.write(`${name}.jsonl: ${count} tasks, sha256 ${hashOf(tasks)}\n`);
  }
}
