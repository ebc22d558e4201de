import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { adminKeyFile } from '../../src/gateway/from-config.js';
import { runRein, startRein } from '../helpers/cli.js';
import { writeExampleConfig } from '../helpers/example-config.js';
import { freePort } from '../helpers/ports.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-cli-usage-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const env = { TEMPORAL_ADDRESS: undefined, REIN_CONFIG: undefined, REIN_GATEWAY_ADMIN_KEY: undefined };

// Each test is a CLI process or two in folders and on ports of its own: they run at once (each CLI
// start is seconds of module loading), with room for a busy machine to start several together.
describe('the CLI says what is wrong and where', { concurrent: true }, () => {
  it("lists --config in every command's help", { timeout: 180_000 }, async () => {
    const commands = ['status', 'train'];
    const helps = await Promise.all(commands.map((command) => runRein([command, '--help'], { cwd: dir, env })));
    helps.forEach((help, i) => {
      expect(help.code).toBe(0);
      expect(help.stdout, commands[i]).toMatch(/-c, --config <file> +config file/);
    });
  });

  it('refuses more tasks per iteration than the task set has', { timeout: 180_000 }, async () => {
    const { file } = await writeExampleConfig(path.join(dir, 'too-many'));
    const { code, stderr } = await runRein(['--config', file, 'train', '--tasks', '100000'], { env });
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /run\.tasksPerIteration \(or --tasks\): 100000 is more than the \d+ tasks in .*train\.jsonl; use at most \d+/,
    );
  });

  it('says when no config file was read, as when Rein runs elsewhere with its own', { timeout: 180_000 }, async () => {
    const { code, stderr } = await runRein(['status', 'started-elsewhere'], {
      cwd: dir,
      env: { ...env, TEMPORAL_ADDRESS: inject('temporalAddress') },
    });
    expect(code).toBe(1);
    expect(stderr).toContain('no run named started-elsewhere');
    expect(stderr).toContain(
      `no config file was read (no --config, REIN_CONFIG or rein.yaml in ${dir}), so this used the defaults; if Rein runs with a config elsewhere, pass it: rein --config FILE`,
    );
  });

  it('names the service and the setting when a port is taken', { timeout: 180_000 }, async () => {
    const { file } = await writeExampleConfig(path.join(dir, 'port'));
    const { config } = loadConfig({ file, env: {} });
    const squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(config.gateway.port, '127.0.0.1', resolve));
    try {
      const { code, stderr } = await runRein(['--config', file, 'gateway'], { env });
      expect(code).toBe(2);
      expect(stderr).toContain(
        `the gateway cannot listen on 127.0.0.1:${config.gateway.port}: another program uses that port. Stop it, or set gateway.port to a free port.`,
      );
    } finally {
      squatter.close();
    }
  });

  it('rein dev says which config it uses and where the admin key is', { timeout: 240_000 }, async () => {
    const { file } = await writeExampleConfig(path.join(dir, 'dev'), {}, { api: { port: await freePort() } });
    const { config } = loadConfig({ file, env: {} });
    const dev = startRein(['--config', file, 'dev'], { env });
    try {
      await dev.waitFor(/Rein is ready/, 210_000);
      expect(dev.output().stdout).toContain(`  Config        ${file}\n`);
      expect(dev.output().stdout).toContain(
        `  Admin key     ${adminKeyFile(config.gateway)} (the gateway's, the API's and the console's)\n`,
      );
    } finally {
      await dev.stop('SIGINT'); // how it shuts down is dev.test.ts's
    }
  });
});
