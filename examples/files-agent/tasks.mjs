#!/usr/bin/env node
// Generates the example task sets deterministically: questions about one setting of one service
// in one environment, each with its own small tree of configuration files (`files`, which the
// harness's tools explore) and the value asked for (`answer`, hidden from the harness). Finding
// it takes listing a few folders and reading the right file: five or six tool calls, fewer with
// a lucky search. `node tasks.mjs` rewrites train.jsonl and heldout.jsonl; their SHA-256 pin them.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildWorld, ENVIRONMENTS, questionFor, seededRandom, SERVICE_NAMES, SETTINGS } from './world.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);

/**
 * The shapes of a tier's worlds. `standard`: 3–6 services, at most one extra folder level, no
 * decoys, for models that can explore. `starter`: one or two services at depth 0, so the answer
 * is a search or four listings away, for the embedded policy (embedded.yaml).
 */
const TIERS = {
  standard: (random) => ({ services: 3 + Math.floor(random() * 4), depth: Math.floor(random() * 2) }),
  starter: (random) => ({ services: 1 + Math.floor(random() * 2), depth: 0 }),
};

/** `count` tasks of a tier from `seed`. */
export function generate(seed, count, prefix, tier = 'standard') {
  const random = seededRandom(seed);
  const pick = (list) => list[Math.floor(random() * list.length)];
  return Array.from({ length: count }, (_, i) => {
    const target = { service: pick(SERVICE_NAMES), env: pick(ENVIRONMENTS), key: pick(Object.keys(SETTINGS)) };
    const shape = { ...TIERS[tier](random), distractors: 0, longFiles: false };
    const { files, answer } = buildWorld(random, target, shape);
    return { id: `${prefix}-${i}`, question: questionFor(target), files, answer };
  });
}

export function hashOf(tasks) {
  return createHash('sha256')
    .update(tasks.map((t) => JSON.stringify(t)).join('\n'))
    .digest('hex');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const [name, seed, count, tier] of [
    ['train', 1, 64, 'standard'],
    ['heldout', 2, 32, 'standard'],
    ['starter-train', 3, 64, 'starter'],
    ['starter-heldout', 4, 32, 'starter'],
  ]) {
    const tasks = generate(seed, count, name, tier);
    writeFileSync(path.join(here, `${name}.jsonl`), `${tasks.map((t) => JSON.stringify(t)).join('\n')}\n`);
    process.stdout.write(`${name}.jsonl: ${count} tasks, sha256 ${hashOf(tasks)}\n`);
  }
}
