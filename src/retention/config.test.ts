import { describe, expect, it } from 'vitest';
import { validateConfig } from '../config/load.js';
import { durationMs } from './config.js';

describe('retention settings', () => {
  it('keep everything by default', () => {
    expect(validateConfig({}, 'test').retention).toEqual({});
  });

  it('read durations in minutes, hours, days and weeks, and keep the text as written', () => {
    expect(durationMs('90m')).toBe(90 * 60_000);
    expect(durationMs('12h')).toBe(12 * 3_600_000);
    expect(durationMs('30d')).toBe(30 * 86_400_000);
    expect(durationMs(' 2w ')).toBe(14 * 86_400_000);
    const config = validateConfig({ retention: { journal: '30d', rolloutFolders: '14d', staging: '7d' } }, 'test');
    expect(config.retention).toEqual({ journal: '30d', rolloutFolders: '14d', staging: '7d' });
  });

  it('refuse anything else, naming the setting and showing how to write one', () => {
    for (const bad of ['30', '30 days', '0d', '-1d', '1.5d', 'forever', '1y']) expect(durationMs(bad)).toBeUndefined();
    expect(() => validateConfig({ retention: { journal: '30 days', calls: '1d' } }, 'rein.yaml')).toThrow(
      /retention\.journal: got "30 days"; expected a whole number and a unit \(m, h, d, w\), e\.g\. "30d"[\s\S]*retention: unknown key "calls"; expected one of: journal, rolloutFolders, staging/,
    );
  });
});
