import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const run = promisify(execFile);
const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-example-'));
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the example calculator agent (not Rein code)', () => {
  it('evaluates arithmetic without eval and refuses anything else', async () => {
    const { calculate } = (await import(path.join(example, 'harness.mjs'))) as { calculate(x: string): number };
    expect(calculate('2+3*4')).toBe(14);
    expect(calculate('(2+3)*4')).toBe(20);
    expect(calculate('7 - 10')).toBe(-3);
    expect(() => calculate('process.exit(1)')).toThrow(/cannot evaluate/);
  });

  it('runs through the gateway with only a base URL and key, and the verifier scores its answer', async () => {
    const rollout = await t.rollout({ taskId: 'six-times-seven' });
    writeFileSync(path.join(dir, 'task.json'), JSON.stringify({ id: 't1', question: '6*7' }));
    await run(
      process.execPath,
      [path.join(example, 'harness.mjs'), path.join(dir, 'task.json'), path.join(dir, 'out.json')],
      {
        env: { ...process.env, OPENAI_BASE_URL: rollout.baseUrl, OPENAI_API_KEY: rollout.key },
      },
    );
    const output = JSON.parse(readFileSync(path.join(dir, 'out.json'), 'utf8'));
    expect(output).toEqual({ taskId: 't1', answer: 'The answer is 42.', turns: 2 });

    writeFileSync(path.join(dir, 'task-with-answer.json'), JSON.stringify({ id: 't1', question: '6*7', answer: 42 }));
    const { stdout } = await run(process.execPath, [
      path.join(example, 'verifier.mjs'),
      path.join(dir, 'task-with-answer.json'),
      path.join(dir, 'out.json'),
    ]);
    expect(JSON.parse(stdout)).toEqual({ components: { success: 1, format: 1 } });

    // Both model calls are in the journal, the second carrying the tool result.
    const calls = await t.store.listCalls(rollout.id);
    expect(calls).toHaveLength(2);
    expect(calls[1]?.requestReceived).toMatchObject({
      messages: [{ role: 'user' }, { role: 'assistant' }, { role: 'tool', content: '42' }],
    });
  });

  it('sends a seed per rollout and turn with AGENT_SEED, and none without', async () => {
    const { seedFor } = (await import(path.join(example, 'harness.mjs'))) as {
      seedFor(seed: string, rolloutId: string, turn: number): number;
    };
    writeFileSync(path.join(dir, 'seeded.json'), JSON.stringify({ id: 't2', question: '6*7' }));
    const seedsSent = async (env: Record<string, string>) => {
      const rollout = await t.rollout({ taskId: 'six-times-seven' });
      await run(
        process.execPath,
        [path.join(example, 'harness.mjs'), path.join(dir, 'seeded.json'), path.join(dir, 'seeded-out.json')],
        {
          env: { ...process.env, OPENAI_BASE_URL: rollout.baseUrl, OPENAI_API_KEY: rollout.key, ...env },
        },
      );
      return (await t.store.listCalls(rollout.id)).map((c) => (c.requestReceived as { seed?: number }).seed);
    };
    expect(await seedsSent({ AGENT_SEED: '7', REIN_ROLLOUT_ID: 'b.t2.0' })).toEqual([
      seedFor('7', 'b.t2.0', 0),
      seedFor('7', 'b.t2.0', 1),
    ]);
    expect(await seedsSent({ AGENT_SEED: '7', REIN_ROLLOUT_ID: 'b.t2.0' })).toEqual([
      seedFor('7', 'b.t2.0', 0),
      seedFor('7', 'b.t2.0', 1),
    ]);
    const other = await seedsSent({ AGENT_SEED: '7', REIN_ROLLOUT_ID: 'b.t2.1' });
    expect(other[0]).not.toBe(seedFor('7', 'b.t2.0', 0));
    expect(new Set([seedFor('7', 'b.t2.0', 0), seedFor('7', 'b.t2.0', 1), seedFor('8', 'b.t2.0', 0)]).size).toBe(3);
    expect(await seedsSent({})).toEqual([undefined, undefined]);
  });

  it('pins its task sets by content hash', async () => {
    const { generate, hashOf } = (await import(path.join(example, 'tasks.mjs'))) as {
      generate(seed: number, n: number, p: string): unknown[];
      hashOf(t: unknown[]): string;
    };
    const lines = (name: string) =>
      readFileSync(path.join(example, `${name}.jsonl`), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
    expect(hashOf(lines('train'))).toBe(hashOf(generate(1, 512, 'train')));
    expect(hashOf(lines('heldout'))).toBe('8d2e5e1d6094715da7d7d2b0d53688506212167d0a0295af219260de89ff9209');
  });
});
