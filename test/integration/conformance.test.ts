import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadScenarios, runWithNpmClient, SCENARIOS_FILE } from '../conformance/openai-npm.js';
import { runWithPythonSdk } from '../conformance/python-sdks.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MODEL } from '../helpers/vllm-like-server.js';

/**
 * The gateway is invisible to a harness: the official openai SDKs (Python and npm) run the same
 * scenarios (test/conformance/scenarios.json) straight against the backend and through the
 * gateway, and must get the same results.
 */
/** Replies the toy model never gives, scripted on the backend stand-in (scenarios that name these models). */
const head = (model: string, object: string) => ({ id: `chatcmpl-${model}`, object, created: 1_700_000_000, model });
const SCRIPTS: Record<string, (res: ServerResponse) => Promise<void> | void> = {
  'script-split-utf8': async (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const first = Buffer.from(
      `data: ${JSON.stringify({ ...head('script-split-utf8', 'chat.completion.chunk'), choices: [{ index: 0, delta: { role: 'assistant', content: 'héllo 🌍 wörld' }, logprobs: null, finish_reason: null }] })}\n\n`,
    );
    const inside = first.indexOf(Buffer.from('🌍')) + 2;
    // Two writes apart in time: the gateway reads them separately, the character cut in two.
    await new Promise((resolve) => res.write(first.subarray(0, inside), resolve));
    await new Promise((resolve) => setTimeout(resolve, 30));
    res.write(first.subarray(inside));
    res.write(
      `data: ${JSON.stringify({ ...head('script-split-utf8', 'chat.completion.chunk'), choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: 'stop' }] })}\n\n`,
    );
    res.end('data: [DONE]\n\n');
  },
  'script-numbers': (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      '{"id":"chatcmpl-n","object":"chat.completion","created":1700000000,"model":"script-numbers","choices":[{"index":0,"message":{"role":"assistant","content":"n"},"logprobs":null,"finish_reason":"stop","score":1.0,"big":9007199254740993,"neg":-0.0}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}',
    );
  },
  'script-forced-usage': (res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (rest: object) =>
      `data: ${JSON.stringify({ ...head('script-forced-usage', 'chat.completion.chunk'), ...rest })}\n\n`;
    res.write(
      chunk({
        choices: [{ index: 0, delta: { role: 'assistant', content: 'used' }, logprobs: null, finish_reason: 'stop' }],
      }),
    );
    res.write(chunk({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } }));
    res.end('data: [DONE]\n\n');
  },
};

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
  for (const [model, script] of Object.entries(SCRIPTS)) {
    t.backend.scripts.set(model, script);
    const routed = await t.admin('PUT', `/api/policies/${model}`, { backend: 'toy', model });
    if (routed.status >= 300) throw new Error(`routing ${model}: ${JSON.stringify(routed.body)}`);
  }
});
afterAll(() => t.close());

const withPythonSdk = (baseUrl: string, key: string, model: string) =>
  runWithPythonSdk('openai_sdk.py', SCENARIOS_FILE, baseUrl, key, model);

describe.each([
  ['the openai npm client', runWithNpmClient],
  ['the official Python openai SDK', withPythonSdk],
])('conformance: %s gets the same through the gateway as from the backend', (_sdk, runAll) => {
  let direct: Record<string, unknown>;
  let viaGateway: Record<string, unknown>;
  beforeAll(async () => {
    const { key, baseUrl } = await t.rollout({ taskId: 'conformance' });
    [direct, viaGateway] = await Promise.all([
      runAll(t.backend.url, 'unused', MODEL),
      runAll(baseUrl, key, 'production'),
    ]);
  });

  it.each(loadScenarios().map((s) => s.name))('%s', (name) => {
    expect(direct[name], `the scenario ran directly`).toBeDefined();
    // An error scenario must fail directly too (else it tests nothing), and only those may.
    expect(JSON.stringify(direct[name]).startsWith('{"error":'), JSON.stringify(direct[name])).toBe(
      name.startsWith('error-'),
    );
    if (name === 'error-unknown-model') return expectBackendWordsThenNamesServed(viaGateway[name], direct[name]);
    expect(viaGateway[name]).toEqual(direct[name]);
  });
});

type ErrorResult = { error: { status: number; body: { message: string } & Record<string, unknown> } };

/**
 * A model the gateway does not serve: the backend's own 404, its words first, then the names the gateway serves (what
 * a harness may ask for instead); everything else as the backend answers.
 */
function expectBackendWordsThenNamesServed(viaGateway: unknown, direct: unknown): void {
  const gateway = viaGateway as ErrorResult;
  const backend = direct as ErrorResult;
  expect(gateway.error.body.message.startsWith(`${backend.error.body.message} Names served here: production`)).toBe(
    true,
  );
  expect({ ...gateway.error, body: { ...gateway.error.body, message: backend.error.body.message } }).toEqual(
    backend.error,
  );
}
