import path from 'node:path';
import OpenAI from 'openai';
import type { ResponseInputItem } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { runWithAnthropicNpm } from '../conformance/anthropic-npm.js';
import { loadScenarios, paramsFor, runWithNpmClient } from '../conformance/openai-npm.js';
import { runWithPythonSdk } from '../conformance/python-sdks.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

/**
 * The gateway is invisible to a harness on the Responses and Anthropic Messages APIs too: four
 * official SDKs (openai npm and Python on test/conformance/responses.json, @anthropic-ai/sdk and
 * the Python anthropic SDK on messages.json) run the same scenarios straight against the embedded
 * policy server (which serves both APIs itself) and through the gateway (which asks the same
 * server chat completions and translates), and must get the same results once the ids and
 * timestamps each answer makes anew are normalised. The harness asks the gateway for
 * `production`, an alias of `base`: the answers name the model that answered, as the chat API's
 * do, so the model field is compared as it is. Greedy decoding of the warm-started base policy
 * (models/base, which calls `calc` for a product) makes the answers reproducible.
 */
const base = path.resolve(import.meta.dirname, '../../models/base');
const RESPONSES = path.resolve(import.meta.dirname, '../conformance/responses.json');
const MESSAGES = path.resolve(import.meta.dirname, '../conformance/messages.json');
let server: PolicyServer;
let t: TestGateway;

beforeAll(async () => {
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { base } });
  t = await startTestGateway();
  t.gateway.router.update({
    backends: { embedded: { endpoints: [server.url], tokenIds: true, logprobs: true } },
    policies: { base: { backend: 'embedded', model: 'base' } },
    aliases: { production: 'base' },
  });
});
afterAll(async () => {
  await t?.close();
  await server?.close();
});

/** Ids each answer makes anew (OpenAI's resp_/msg_/fc_/rs_/call_, Anthropic's msg_/toolu_, vLLM's tool call ids). */
const FRESH_ID = /^(?:(?:resp|msg|fc|rs|call|toolu)_[A-Za-z0-9_]+|chatcmpl-tool-[A-Za-z0-9]+)$/;

/**
 * A result with each id replaced by the order it first appears in (so an id that recurs, as an
 * item id in every event of its item, must recur on both sides) and `created_at` blanked.
 */
function normalised(result: unknown): unknown {
  const ids = new Map<string, string>();
  const walk = (value: unknown, key?: string): unknown => {
    if (typeof value === 'string' && FRESH_ID.test(value)) {
      if (!ids.has(value)) ids.set(value, `<id ${ids.size}>`);
      return ids.get(value);
    }
    if (key === 'created_at' && typeof value === 'number') return '<created_at>';
    if (Array.isArray(value)) return value.map((item) => walk(item));
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, k)]));
    return value;
  };
  return walk(JSON.parse(JSON.stringify(result)));
}

/** Whether a result holds a call of `calc` (a function_call item or a tool_use block). */
function callsCalc(value: unknown): boolean {
  if (Array.isArray(value)) return value.some(callsCalc);
  if (value === null || typeof value !== 'object') return false;
  const { type, name } = value as { type?: unknown; name?: unknown };
  if ((type === 'function_call' || type === 'tool_use') && name === 'calc') return true;
  return Object.values(value).some(callsCalc);
}

type Runner = (baseUrl: string, key: string, model: string) => Promise<Record<string, unknown>>;

describe.each<[string, string, Runner]>([
  ['the openai npm client', RESPONSES, (...side) => runWithNpmClient(...side, RESPONSES)],
  ['the Python openai SDK', RESPONSES, (...side) => runWithPythonSdk('openai_sdk.py', RESPONSES, ...side)],
  ['the @anthropic-ai/sdk npm client', MESSAGES, (...side) => runWithAnthropicNpm(...side, MESSAGES)],
  ['the Python anthropic SDK', MESSAGES, (...side) => runWithPythonSdk('anthropic_sdk.py', MESSAGES, ...side)],
])('conformance: %s gets the same through the gateway as from the embedded server', (_sdk, file, runAll) => {
  let direct: Record<string, unknown>;
  let viaGateway: Record<string, unknown>;
  beforeAll(async () => {
    const { key, baseUrl } = await t.rollout({ taskId: 'conformance-apis' });
    // One after the other: the server's batches stay the same size, so greedy decoding gives the same tokens.
    direct = await runAll(server.url, 'unused', 'base');
    viaGateway = await runAll(baseUrl, key, 'production');
  });

  it.each(loadScenarios(file).map((s) => s.name))('%s', (name) => {
    expect(direct[name], `the scenario ran directly`).toBeDefined();
    // An error scenario must fail directly too (else it tests nothing), and only those may.
    expect(JSON.stringify(direct[name]).startsWith('{"error":'), JSON.stringify(direct[name])).toBe(
      name.startsWith('error-'),
    );
    // The tool scenarios test tool calls only if the model makes one.
    if (/-tool(-stream-helper)?$/.test(name)) expect(callsCalc(direct[name]), JSON.stringify(direct[name])).toBe(true);
    expect(normalised(viaGateway[name])).toEqual(normalised(direct[name]));
  });
});

/**
 * `previous_response_id` is the gateway's own (it expands the chain from its journal; the
 * embedded server keeps no responses): the chained answer must be what the server answers for
 * the expanded items sent whole.
 */
describe('conformance: a Responses chain through the gateway', () => {
  it('answers as the embedded server does for the whole conversation', async () => {
    const [first] = loadScenarios(RESPONSES).filter((s) => s.name === 'responses-tool');
    const { client } = await t.rollout({ taskId: 'conformance-apis-chain' });
    const asked = paramsFor(first!, 'production');
    const called = await client.responses.create(asked);
    const call = called.output.find((item) => item.type === 'function_call');
    expect(call, 'the model called calc').toBeDefined();
    const callOutput: ResponseInputItem = { type: 'function_call_output', call_id: call!.call_id, output: '391' };
    const chained = await client.responses.create({ ...asked, previous_response_id: called.id, input: [callOutput] });

    const direct = new OpenAI({ baseURL: server.url, apiKey: 'unused', maxRetries: 0 });
    const whole = await direct.responses.create({
      ...paramsFor(first!, 'base'),
      input: [{ role: 'user', content: asked.input }, ...called.output, callOutput] as ResponseInputItem[],
    });
    expect(chained.previous_response_id).toBe(called.id);
    expect(normalised({ ...chained, previous_response_id: null })).toEqual(normalised(whole));
  });
});
