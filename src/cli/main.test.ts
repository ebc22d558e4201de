import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { configDefaults } from '../config/schema.js';
import { packageRoot } from '../package-root.js';
import { helpSettings } from './context.js';
import { buildProgram, commandModules, main } from './main.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-cli-main-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

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
      (await m.load())(program, configDefaults());
      expect(program.commands.map((c) => c.name())).toEqual(m.commands);
    }
  });

  it('builds the named command alone, with --config before or after it, and every command for help or an unknown word', async () => {
    const names = async (...args: string[]) =>
      (await buildProgram(['node', 'rein', ...args])).commands.map((c) => c.name());
    expect(await names('gateway', '--port', '1')).toEqual(['gateway']);
    expect(await names('-c', 'rein.yaml', 'promote', 'v2')).toEqual([
      'register',
      'gate',
      'promote',
      'rollback',
      'decision',
      'decisions',
      'ledger',
    ]);
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
    const { version } = JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await rein('--version')).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    expect(await rein('-V')).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});

describe('usage errors', () => {
  it('exit 2 with what to give, before any store is opened: a decision with no id, a ledger diff of one entry', async () => {
    const store = path.join(dir, 'never-opened');
    writeFileSync(path.join(dir, 'usage.yaml'), `dataDir: ${store}\n`);
    const config = path.join(dir, 'usage.yaml');
    const decision = await rein('--config', config, 'decision');
    expect(decision.code).toBe(2);
    expect(decision.stderr).toContain(
      'rein decision: name a decision id, or --candidate VERSION for its newest decision',
    );
    const diff = await rein('--config', config, 'ledger', '--diff', 'release.r.v1');
    expect(diff.code).toBe(2);
    expect(diff.stderr).toContain('--diff takes two entries');
    expect(existsSync(store)).toBe(false);
  });
});

/** Every help text of a program: its own and each command's, subcommands included. */
function allHelp(command: Command): string {
  return [command.helpInformation(), ...command.commands.map(allHelp)].join('\n');
}

/** The ports the schema gives services by default. */
function defaultPorts(): number[] {
  const d = configDefaults();
  return [d.gateway.port, d.policyServer.port, d.api.port, d.temporal.devServer.port, d.temporal.devServer.uiPort];
}

describe('help shows the ports the services would use', () => {
  const project = path.join(dir, 'project');
  const empty = path.join(dir, 'empty');
  mkdirSync(project, { recursive: true });
  mkdirSync(empty, { recursive: true });
  const file = path.join(project, 'rein.yaml');
  writeFileSync(
    file,
    'gateway: { host: 0.0.0.0, port: 9400 }\npolicyServer: { host: 127.0.0.2, port: 9401 }\napi: { port: 9402 }\ntemporal:\n  devServer: { ip: 127.0.0.3, port: 9233, uiPort: 9234 }\n',
  );
  const help = async (args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}) =>
    allHelp(await buildProgram(['node', 'rein', ...args], { env: {}, cwd: empty, ...options }));

  it('the configured ones: --config before or after the command, REIN_CONFIG, rein.yaml in the folder', async () => {
    const helps = [
      await help(['--config', file, '--help']),
      await help([`--config=${file}`]),
      await help(['-c', file]),
      await help([], { env: { REIN_CONFIG: file } }),
      await help([], { cwd: project }),
    ];
    for (const text of helps) {
      expect(text).toContain('0.0.0.0:9400');
      expect(text).toContain('127.0.0.2:9401');
      expect(text).toContain('127.0.0.1:9402');
      expect(text).toContain('127.0.0.3:9233');
      expect(text).toContain('127.0.0.3:9234');
      // No second copy of a default port anywhere in the help.
      for (const port of defaultPorts()) expect(text).not.toContain(String(port));
    }
    for (const args of [
      ['gateway', '--config', file, '--help'],
      ['gateway', `--config=${file}`, '--help'],
    ]) {
      expect(await help(args)).toContain('0.0.0.0:9400');
    }
    expect(await help(['--help'], { env: { REIN_GATEWAY_PORT: '9500' } })).toContain('127.0.0.1:9500');
  });

  it("rein policy serve listens where the config's policy server does, unless told otherwise", async () => {
    const serve = (
      await buildProgram(['node', 'rein', '--config', file, 'policy', 'serve'], { env: {}, cwd: empty })
    ).commands[0]?.commands.find((c) => c.name() === 'serve');
    expect(serve?.options.find((o) => o.long === '--port')?.defaultValue).toBe('9401');
    expect(serve?.options.find((o) => o.long === '--host')?.defaultValue).toBe('127.0.0.2');
  });

  it("the schema's defaults without a config file, or when the config cannot be read", async () => {
    const d = configDefaults();
    const broken = path.join(dir, 'broken.yaml');
    writeFileSync(broken, 'gateway: { port: "eighty" }\n');
    for (const text of [
      await help([]),
      await help(['--config', broken, '--help']),
      await help(['--config', path.join(dir, 'absent.yaml')]),
    ]) {
      expect(text).toContain(`${d.gateway.host}:${d.gateway.port}`);
      expect(text).toContain(`${d.policyServer.host}:${d.policyServer.port}`);
      expect(text).toContain(`${d.api.host}:${d.api.port}`);
      expect(text).toContain(`${d.temporal.devServer.ip}:${d.temporal.devServer.uiPort}`);
    }
    expect(await rein('--config', broken, 'gateway', '--help')).toMatchObject({ code: 0, stderr: '' });
    // References generated from the program ask for the defaults, whatever config is about.
    expect(
      allHelp(await buildProgram(['node', 'rein'], { settings: 'defaults', env: { REIN_CONFIG: file } })),
    ).toContain(`${d.gateway.host}:${d.gateway.port}`);
  });

  it(
    'leaves a pipe given as the config (--config <(…)) to the command: read twice, it would be empty the second time',
    { skip: process.platform === 'win32' },
    () => {
      const fifo = path.join(dir, 'config.fifo');
      execFileSync('mkfifo', [fifo]);
      // Reading a pipe nobody writes to would never return.
      expect(helpSettings(['--config', fifo], { env: {}, cwd: empty }).gateway.port).toBe(
        configDefaults().gateway.port,
      );
      expect(helpSettings([], { env: { REIN_CONFIG: fifo }, cwd: empty }).gateway.port).toBe(
        configDefaults().gateway.port,
      );
    },
  );
});
