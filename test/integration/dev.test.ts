import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, describe, expect, it } from 'vitest';
import { startRein } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';

const scratch = mkdtempSync(path.join(os.tmpdir(), 'rein-dev-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const env = {
  TEMPORAL_ADDRESS: undefined,
  TEMPORAL_NAMESPACE: undefined,
  REIN_DATA_DIR: undefined,
  REIN_CONFIG: undefined,
};

describe('the embedded Temporal dev server', () => {
  it('`rein dev` runs a workflow the Web UI shows, and the state survives a restart with `rein server`', async () => {
    const port = await freePort();
    const uiPort = await freePort();
    const [httpPort, metricsPort] = [await freePort(), await freePort()];
    const gatewayPort = await freePort();
    const policyPort = await freePort();
    const apiPort = await freePort();
    const config = path.join(scratch, 'rein.yaml');
    writeFileSync(
      config,
      `dataDir: ./state\nlog:\n  level: warn\ntemporal:\n  devServer:\n    ip: 127.0.0.1\n    port: ${port}\n    uiPort: ${uiPort}\n` +
        `    httpPort: ${httpPort}\n    metricsPort: ${metricsPort}\n` +
        `gateway:\n  port: ${gatewayPort}\npolicyServer:\n  port: ${policyPort}\napi:\n  port: ${apiPort}\n`,
    );

    const dev = startRein(['--config', config, 'dev'], { cwd: scratch, env });
    await dev.waitFor(/Rein is ready/);
    const workflowId = /Workflow: (\S+)/.exec(dev.output().stdout)?.[1];
    expect(workflowId).toMatch(/^rein-preflight-/);
    expect(dev.output().stdout).toContain(
      `Web UI:   http://127.0.0.1:${uiPort}/namespaces/default/workflows/${workflowId}/`,
    );
    expect(existsSync(path.join(scratch, 'state', 'temporal', 'dev.sqlite'))).toBe(true);
    // The embedded default's serving side is up too: the gateway routes `production` to the policy server's base.
    const adminKey = readFileSync(path.join(scratch, 'state', 'gateway', 'admin-key'), 'utf8').trim();
    const routes = (await (
      await fetch(`http://127.0.0.1:${gatewayPort}/api/policies`, { headers: { authorization: `Bearer ${adminKey}` } })
    ).json()) as { items: Array<{ policyVersion: string; aliases: string[] }> };
    expect(routes.items).toEqual([expect.objectContaining({ policyVersion: 'v0', aliases: ['production'] })]);
    expect(
      (
        (await (await fetch(`http://127.0.0.1:${policyPort}/v1/models`)).json()) as { data: Array<{ id: string }> }
      ).data.map((m) => m.id),
    ).toEqual(['v0']);
    // And the HTTP API, with the same admin key.
    expect(dev.output().stdout).toContain(`HTTP API      http://127.0.0.1:${apiPort}`);
    const runs = await fetch(`http://127.0.0.1:${apiPort}/api/runs`, {
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(runs.status).toBe(200);
    await runs.arrayBuffer();
    // The console on the API's port, its page and script from the package.
    expect(dev.output().stdout).toContain(`Console       http://127.0.0.1:${apiPort}/console/`);
    expect(await (await fetch(`http://127.0.0.1:${apiPort}/console/`)).text()).toContain('<script src="app.js">');
    const script = await fetch(`http://127.0.0.1:${apiPort}/console/app.js`);
    expect(script.headers.get('content-type')).toContain('text/javascript');
    await script.arrayBuffer();

    // What the Web UI shows is served by its own HTTP API.
    const listed = (await (await fetch(`http://127.0.0.1:${uiPort}/api/v1/namespaces/default/workflows`)).json()) as {
      executions: Array<{ execution: { workflowId: string }; status: string }>;
    };
    expect(listed.executions).toContainEqual(
      expect.objectContaining({
        execution: expect.objectContaining({ workflowId }),
        status: 'WORKFLOW_EXECUTION_STATUS_COMPLETED',
      }),
    );

    // The ports the CLI would pick at random are the configured ones: its HTTP API and its metrics.
    const namespaces = await fetch(`http://127.0.0.1:${httpPort}/api/v1/namespaces`);
    expect(namespaces.status).toBe(200);
    await namespaces.arrayBuffer();
    expect(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()).toMatch(/^# (HELP|TYPE) /m);

    // A second `rein dev` with its own ports and data but the same dev server address joins that
    // server rather than starting one, and says so.
    const second = path.join(scratch, 'second.yaml');
    writeFileSync(
      second,
      `dataDir: ./state-2\nlog:\n  level: warn\ntemporal:\n  taskQueue: second\n  devServer:\n    ip: 127.0.0.1\n    port: ${port}\n    uiPort: ${uiPort}\n` +
        `gateway:\n  port: ${await freePort()}\npolicyServer:\n  port: ${await freePort()}\napi:\n  port: ${await freePort()}\n`,
    );
    const joined = startRein(['--config', second, 'dev'], { cwd: scratch, env });
    await joined.waitFor(/Rein is ready/);
    // Signalled the moment it says so, it still shuts down in order (it listens before it speaks).
    expect(joined.output().stdout).toContain('joined the Temporal dev server already running there');
    expect(dev.output().stdout).not.toContain('joined the Temporal dev server');
    expect(await joined.stop('SIGINT'), JSON.stringify(joined.output())).toBe(0);

    // A second dev server on the same ports is refused with the reason and the fix.
    const clash = startRein(['--config', config, 'server'], { cwd: scratch, env });
    expect(await clash.exited).toBe(1);
    expect(clash.output().stderr).toContain(`port ${port} on 127.0.0.1 (the dev server's gRPC) is already in use`);

    expect(await dev.stop('SIGINT'), JSON.stringify(dev.output())).toBe(0);

    const server = startRein(['--config', config, 'server'], { cwd: scratch, env });
    await server.waitFor(/Press Ctrl-C to stop/);
    const connection = await Connection.connect({ address: `127.0.0.1:${port}` });
    try {
      const client = new Client({ connection });
      const description = await client.workflow.getHandle(workflowId as string).describe();
      expect(description.status.name).toBe('COMPLETED');
      expect(description.searchAttributes.ReinStage).toEqual(['preflight-passed']);
    } finally {
      await connection.close();
    }
    expect(await server.stop('SIGTERM'), JSON.stringify(server.output())).toBe(0);
  }, 240_000);
});
