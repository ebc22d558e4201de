import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_REDACTION_RULES, redactText } from '../gateway/redact.js';
import { RedactingLog } from './redacting-log.js';

const KEY = `-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nq83fVz9Y\n-----END RSA PRIVATE KEY-----`;
const SECRET = 'sk-abcdefghijklmnopqrstuvwxyz012345';

/** What a RedactingLog writes for `text` read in the given pieces. */
function written(text: string, cuts: number[]): string {
  const out: Buffer[] = [];
  const log = new RedactingLog({ write: (c) => out.push(c), close: (done) => done() }, DEFAULT_REDACTION_RULES);
  const bytes = Buffer.from(text);
  let at = 0;
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1))].sort((a, b) => a - b)) {
    log.write(bytes.subarray(at, cut));
    at = cut;
  }
  log.write(bytes.subarray(at));
  log.close(() => undefined);
  return Buffer.concat(out).toString('utf8');
}

describe('a log redacted as it is written', () => {
  it('writes what redacting the whole output at once gives, however the reads split it', () => {
    const line = fc.constantFrom(
      'plain text ✓',
      `token ${SECRET} used`,
      'Authorization: Bearer abcdefgh12345678',
      KEY,
      '',
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 6 }), (lines, cuts) => {
        const text = lines.join('\n');
        expect(written(text, cuts)).toBe(redactText(text, DEFAULT_REDACTION_RULES));
      }),
    );
  });

  it('never lets a secret reach the disk, a private key split over many reads included', () => {
    const text = `start\n${KEY}\nafter ${SECRET}\n`;
    const out = written(text, [3, 20, 40, 41, 60, 80]);
    expect(out).not.toContain('MIIEowIBAAKCAQEA');
    expect(out).not.toContain(SECRET);
    expect(out).toContain('[REDACTED:private-key]');
  });

  it('writes an unterminated private key as it stands past its hold limit (the upload redacts what it can)', () => {
    const out = written(`-----BEGIN PRIVATE KEY-----\n${'x'.repeat(70_000)}\nnext line\n`, []);
    expect(out.endsWith('next line\n')).toBe(true);
  });
});
