import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { trainerLogFile } from './trainer-log.js';

describe('trainerLogFile', () => {
  it("keeps every earlier try's log beside the new one", () => {
    const dir = path.join(mkdtempSync(path.join(os.tmpdir(), 'rein-trainer-log-')), 'logs');
    const out = '/data/policies/run/run.v1';
    for (const attempt of [1, 2, 3]) writeFileSync(trainerLogFile(dir, out), `attempt ${attempt}\n`);
    expect(readdirSync(dir).sort()).toEqual(['run.v1.train.log', 'run.v1.train.log.1', 'run.v1.train.log.2']);
    expect(readFileSync(path.join(dir, 'run.v1.train.log'), 'utf8')).toBe('attempt 3\n');
    expect(readFileSync(path.join(dir, 'run.v1.train.log.1'), 'utf8')).toBe('attempt 1\n');
  });
});
