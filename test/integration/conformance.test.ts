import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadScenarios, runWithNpmClient, SCENARIOS_FILE } from '../conformance/openai-npm.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MODEL } from '../helpers/vllm-like-server.js';

/**
 * The gateway is invisible to a harness: the official openai SDKs (Python and npm) run the same
 * scenarios (test/conformance/scenarios.json) straight against the backend and through the
 * gateway, and must get the same results.
 */
const python = path.resolve(import.meta.dirname, '../../.tools/conformance/bin/python');
const pythonRunner = path.resolve(import.meta.dirname, '../conformance/openai_sdk.py');

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(() => t.close());

async function withPythonSdk(baseUrl: string, key: string, model: string): Promise<Record<string, unknown>> {
  const { stdout } = await promisify(execFile)(python, [pythonRunner, SCENARIOS_FILE, baseUrl, key, model], { maxBuffer: 64 << 20 });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe.each([
  ['the openai npm client', runWithNpmClient],
  ['the official Python openai SDK', withPythonSdk],
])('conformance: %s gets the same through the gateway as from the backend', (_sdk, runAll) => {
  let direct: Record<string, unknown>;
  let viaGateway: Record<string, unknown>;
  beforeAll(async () => {
    const { key, baseUrl } = await t.rollout({ taskId: 'conformance' });
    [direct, viaGateway] = await Promise.all([runAll(t.backend.url, 'unused', MODEL), runAll(baseUrl, key, 'production')]);
  });

  it.each(loadScenarios().map((s) => s.name))('%s', (name) => {
    expect(direct[name], `the scenario ran directly`).toBeDefined();
    expect(viaGateway[name]).toEqual(direct[name]);
  });
});
