import { createRequire } from 'node:module';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ChatTokenizer } from '../tokenizer/chat-tokenizer.js';
import { tokenizerConfig, tokenizerJson } from './chat-format.js';
import { loadCheckpoint } from './checkpoint.js';
import { readyBackend } from './model.js';
import { demonstration, evaluateGreedy, expressionFor, fromMemoryShare } from './warm-start.js';

const tokenizer = new ChatTokenizer(tokenizerJson(), tokenizerConfig() as Record<string, unknown>);
const root = path.resolve(path.dirname(createRequire(import.meta.url).resolve('../../package.json')));
beforeAll(() => readyBackend());

describe('warm-start demonstrations', () => {
  it('turn each task form into the calculator expression', () => {
    expect(expressionFor({ id: 'a', question: '12 plus 30?', answer: 42 })).toBe('12+30');
    expect(expressionFor({ id: 'b', question: '6 times 7?', answer: 42 })).toBe('6*7');
    expect(expressionFor({ id: 'c', question: '50 minus 8?', answer: 42 })).toBe('50-8');
    expect(expressionFor({ id: 'd', question: '40 apples and 2 more?', answer: 42 })).toBe('40+2');
    expect(() => expressionFor({ id: 'e', question: 'what?', answer: 0 })).toThrow(/no demonstration for task e/);
  });

  it('train exactly the assistant turns of a whole episode, in the chat template the server renders', () => {
    const demo = demonstration(tokenizer, { id: 'a', question: '6 times 7?', answer: 42 });
    const trained = tokenizer.decode(demo.ids.filter((_, i) => demo.lossMask[i] === 1));
    expect(trained).toBe('<tool_call>calc{"x":"6*7"}</tool_call><|end|>42<|end|>');
    const rendered = tokenizer.render(
      {
        messages: [
          { role: 'user', content: '6 times 7?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_0', type: 'function', function: { name: 'calc', arguments: '{"x":"6*7"}' } }],
          },
          { role: 'tool', tool_call_id: 'call_0', content: '42' },
        ],
      },
      true,
    );
    expect(tokenizer.decode(demo.ids).startsWith(rendered)).toBe(true);
  });

  it('answer from memory for the share of their form: mostly for sums, rarely otherwise', () => {
    const memory = demonstration(tokenizer, { id: 'a', question: '12 plus 30?', answer: 42 }, 'memory');
    expect(tokenizer.decode(memory.ids.filter((_, i) => memory.lossMask[i] === 1))).toBe('42<|end|>');
    expect(fromMemoryShare({ id: 'a', question: '12 plus 30?', answer: 42 })).toBeGreaterThan(0.5);
    expect(fromMemoryShare({ id: 'b', question: '6 times 7?', answer: 42 })).toBeLessThan(0.5);
  });
});

describe('the committed base checkpoint', () => {
  it('sits where RL has signal: some held-out tasks solved greedily, far from all', () => {
    const base = loadCheckpoint(path.join(root, 'models/base'));
    expect(base.info).toMatchObject({ name: 'base', warmStart: { steps: 250, seed: 1 } });
    // The example agent's multi-turn conversations overflowed the former 96-token context (400s, class harness).
    expect(base.config.maxPositions).toBeGreaterThanOrEqual(1024);
    const heldout = [
      { id: 'h1', question: '33 minus 29?', answer: 4 },
      { id: 'h2', question: '87 minus 63?', answer: 24 },
      { id: 'h3', question: '37 times 78?', answer: 2886 },
      { id: 'h4', question: '15 plus 27?', answer: 42 },
      { id: 'h5', question: '8 apples and 9 more?', answer: 17 },
      { id: 'h6', question: '64 times 3?', answer: 192 },
    ];
    const success = evaluateGreedy(base, heldout);
    expect(success).toBeGreaterThan(0);
    expect(success).toBeLessThan(1);
    expect((base.info.warmStart as { heldoutGreedySuccess: number }).heldoutGreedySuccess).toBeGreaterThanOrEqual(0.3);
    expect((base.info.warmStart as { heldoutGreedySuccess: number }).heldoutGreedySuccess).toBeLessThanOrEqual(0.6);
    base.model.dispose();
  });
});
