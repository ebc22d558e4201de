import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RolloutKeys } from './keys.js';
import { DEFAULT_REDACTION_RULES, redact, redactionRules, redactText } from './redact.js';
import { ADVERSARIAL_UNITS, repeatedTo } from '../../test/helpers/redaction-adversarial.js';

describe('redact', () => {
  it('replaces secrets in every string of a nested value and leaves the rest alone', () => {
    const input = {
      model: 'production',
      messages: [
        { role: 'user', content: 'use Authorization: Bearer abc.def.ghi-123456 please' },
        { role: 'tool', content: 'AWS key AKIAABCDEFGHIJKLMNOP found' },
      ],
      temperature: 0.7,
    };
    expect(redact(input, DEFAULT_REDACTION_RULES)).toEqual({
      model: 'production',
      messages: [
        { role: 'user', content: 'use Authorization: [REDACTED:bearer-token] please' },
        { role: 'tool', content: 'AWS key [REDACTED:aws-access-key] found' },
      ],
      temperature: 0.7,
    });
    expect(input.messages[0]?.content).toContain('Bearer abc');
  });

  it('copies only what it changes, and returns a value with nothing to redact as it is', () => {
    const clean = { model: 'production', messages: [{ role: 'user', content: 'hello' }], n: 2 };
    expect(redact(clean, DEFAULT_REDACTION_RULES)).toBe(clean);
    const mixed = {
      messages: [
        { role: 'system', content: 'plain' },
        { role: 'user', content: 'sk-abcdefghijklmnopqrstuv' },
      ],
      tools: [{ name: 't' }],
    };
    const out = redact(mixed, DEFAULT_REDACTION_RULES);
    expect(out).toEqual({
      messages: [
        { role: 'system', content: 'plain' },
        { role: 'user', content: '[REDACTED:openai-key]' },
      ],
      tools: [{ name: 't' }],
    });
    expect(out.messages[0]).toBe(mixed.messages[0]);
    expect(out.tools).toBe(mixed.tools);
    expect(mixed.messages[1]?.content).toBe('sk-abcdefghijklmnopqrstuv');
    const poisoned = JSON.parse('{"__proto__": "Bearer abcdefghijkl"}') as Record<string, unknown>;
    const cleaned = redact(poisoned, DEFAULT_REDACTION_RULES);
    expect(Object.getPrototypeOf(cleaned)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(cleaned, '__proto__')?.value).toBe('[REDACTED:bearer-token]');
  });

  it('redacts keys too, keeping every entry when two secrets become the same mark', () => {
    const secret = 'sk-abcdefghijklmnopqrstuvwx';
    const other = 'sk-zyxwvutsrqponmlkjihgfedc';
    const value = { components: { [secret]: 1, [other]: 0.5, success: 1 }, input: { ok: true } };
    const cleaned = redact(value, DEFAULT_REDACTION_RULES);
    expect(cleaned).toEqual({
      components: { '[REDACTED:openai-key]': 1, '[REDACTED:openai-key] (2)': 0.5, success: 1 },
      input: { ok: true },
    });
    expect(JSON.stringify(cleaned)).not.toContain('sk-');
    expect(cleaned.input).toBe(value.input);
  });

  it('applies custom rules and names a broken one', () => {
    const rules = redactionRules([{ name: 'ticket', regex: 'TICKET-\\d+' }], false);
    expect(redact('see TICKET-4711 and TICKET-1', rules)).toBe('see [REDACTED:ticket] and [REDACTED:ticket]');
    expect(() => redactionRules([{ name: 'bad', regex: '(' }])).toThrow(/rule "bad" has an invalid regex/);
  });

  it('removes every rollout and verifier key the gateway can issue, whatever characters its MAC ends with', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.string({ minLength: 1 }),
        fc.integer({ min: 1, max: 999 }),
        (secret, rolloutId, attempt) => {
          const keys = new RolloutKeys(Buffer.from(secret));
          const key = keys.issue(rolloutId, attempt);
          expect(redact(`key "${key}", again ${key}.`, DEFAULT_REDACTION_RULES)).toBe(
            'key "[REDACTED:rollout-key]", again [REDACTED:rollout-key].',
          );
          expect(redact(`verifier ${keys.issueVerifierKey(rolloutId)}!`, DEFAULT_REDACTION_RULES)).toBe(
            'verifier [REDACTED:verifier-key]!',
          );
        },
      ),
      { numRuns: 500 },
    );
  });

  it('runs every default rule in time linear in its input, even on text built to make a backtracking engine stall', () => {
    const adversarial = ADVERSARIAL_UNITS;
    expect(Object.keys(adversarial).sort()).toEqual(DEFAULT_REDACTION_RULES.map((r) => r.name).sort());
    const MiB = 1024 * 1024;
    const slow: Array<{ rule: string; unit: string; ms: number }> = [];
    for (const rule of DEFAULT_REDACTION_RULES) {
      for (const unit of adversarial[rule.name] ?? []) {
        const text = repeatedTo(unit, MiB);
        const started = performance.now();
        redactText(text, [rule]);
        const ms = performance.now() - started;
        // Generous: linear takes well under a second here, quadratic takes minutes.
        if (ms > 10_000) slow.push({ rule: rule.name, unit, ms });
      }
    }
    expect(slow).toEqual([]);
  });

  it('keeps the text around a secret as it was, astral characters and lone surrogates included', () => {
    expect(redactText('\uD800 sk-abcdefghijklmnopqrstuv 😀 中文 \uDC00', DEFAULT_REDACTION_RULES)).toBe(
      '\uD800 [REDACTED:openai-key] 😀 中文 \uDC00',
    );
  });

  it('refuses, naming the rule, a custom rule that needs backtracking (backreferences, lookaround)', () => {
    expect(() => redactionRules([{ name: 'repeat', regex: '(a+)\\1' }])).toThrow(
      /gateway\.redact: rule "repeat" has an invalid regex.*linear time: no backreferences or lookaround/,
    );
    expect(() => redactionRules([{ name: 'ahead', regex: 'key(?=[0-9])' }])).toThrow(/rule "ahead"/);
    expect(
      redactionRules([{ name: 'ok', regex: '(?i)ticket-\\d+' }], false).map((r) => redactText('TICKET-1 x', [r])),
    ).toEqual(['[REDACTED:ok] x']);
  });
});
