import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { describe, expect, it, vi } from 'vitest';
import { packageRoot } from '../package-root.js';
import { buildProgram, commandModules, main } from './main.js';

/** main() in this process, with what it writes to stdout and stderr. */
async function rein(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const written = { stdout: '', stderr: '' };
  const capture = (stream: 'stdout' | 'stderr') =>
    vi.spyOn(process[stream], 'write').mockImplementation((chunk: string | Uint8Array) => {
      written[stream] += String(chunk);
      return true;
    });
  const spies = [capture('stdout'), capture('stderr')];
  try {
    const code = await main(['node', 'rein', ...args]);
    return { code, ...written };
  } finally {
    for (const spy of spies) spy.mockRestore();
    process.exitCode = undefined;
  }
}

describe('the CLI loads only the module of the command it runs', () => {
  it('names, for each command module, exactly the top-level commands it adds', async () => {
    for (const m of commandModules) {
      const program = new Command('rein');
      (await m.load())(program);
      expect(program.commands.map((c) => c.name())).toEqual(m.commands);
    }
  });

  it('builds the named command alone, with --config before or after it, and every command for help or an unknown word', async () => {
    const names = async (...args: string[]) => (await buildProgram(['node', 'rein', ...args])).commands.map((c) => c.name());
    expect(await names('gateway', '--port', '1')).toEqual(['gateway']);
    expect(await names('-c', 'rein.yaml', 'promote', 'v2')).toEqual(['register', 'gate', 'promote', 'rollback', 'decision', 'decisions', 'ledger']);
    expect(await names('--config', 'rein.yaml', 'policy', 'serve')).toEqual(['policy']);
    const all = commandModules.flatMap((m) => m.commands);
    expect(await names('--help')).toEqual(all);
    expect(await names('-c', 'rein.yaml', '--help', 'train')).toEqual(all);
    expect(await names('help', 'train')).toEqual(all);
    expect(await names('trian')).toEqual(all);
    expect(await names()).toEqual(all);
    // The version needs no command.
    expect(await names('--version')).toEqual([]);
    expect(await names('-c', 'rein.yaml', '-V')).toEqual([]);
  });
});

describe('rein --version', () => {
  it("prints package.json's version and exits 0, as -V too", async () => {
    const { version } = JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await rein('--version')).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    expect(await rein('-V')).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});
