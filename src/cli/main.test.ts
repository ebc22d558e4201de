import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram, commandModules } from './main.js';

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
  });
});
