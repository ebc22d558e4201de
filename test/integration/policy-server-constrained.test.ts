import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { Qwen3Model, readyBackend } from '../../src/policy/model.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';

/**
 * Constrained decoding through the real policy server and the official `openai` client. The model
 * is untrained (random weights): whatever it would write, the reply is still a valid tool call or
 * valid JSON matching the schema, because only tokens that keep it so may be drawn.
 */
const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-policy-constrained-'));
let server: PolicyServer;
let client: OpenAI;

beforeAll(async () => {
  await readyBackend();
  const config = { hiddenSize: 16, numHeads: 2, numKvHeads: 1, headDim: 8, intermediateSize: 32, numLayers: 1 };
  const model = Qwen3Model.init(defaultModelConfig({ ...config, maxPositions: 1024 }), 7);
  saveCheckpoint(path.join(dir, 'v1'), model);
  model.dispose();
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { tiny: path.join(dir, 'v1') } });
  client = new OpenAI({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const ajv = new Ajv({ strict: false });
const messages = [{ role: 'user' as const, content: 'go' }];
const ask = { model: 'tiny', messages, temperature: 1, seed: 3, max_tokens: 400 };
const point = {
  type: 'object',
  properties: {
    ok: { type: 'boolean' },
    level: { enum: ['low', 'high', 3] },
    at: { type: 'object', properties: { x: { type: 'integer' } }, required: ['x'], additionalProperties: false },
  },
  required: ['ok', 'level', 'at'],
  additionalProperties: false,
};
const tools = [
  { type: 'function' as const, function: { name: 'move', parameters: point, strict: true } },
  { type: 'function' as const, function: { name: 'stop', parameters: { type: 'object', properties: {} } } },
];
const schemaFormat = { type: 'json_schema' as const, json_schema: { name: 'point', schema: point, strict: true } };

/** The whole text of a streamed choice and its tool calls, as a client puts them together. */
async function collect(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
  let content = '';
  let finish: string | null = null;
  const calls: Array<{ name: string; arguments: string }> = [];
  for await (const chunk of stream)
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? '';
      for (const c of choice.delta.tool_calls ?? [])
        calls.push({ name: c.function?.name ?? '', arguments: c.function?.arguments ?? '' });
      finish = choice.finish_reason ?? finish;
    }
  return { content, finish, calls };
}

describe('constrained decoding in the embedded policy server', () => {
  it('answers tool_choice required with calls of the offered tools whose arguments match their schemas', async () => {
    const reply = await client.chat.completions.create({ ...ask, tools, tool_choice: 'required', n: 4 });
    for (const choice of reply.choices) {
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content).toBeNull();
      for (const call of choice.message.tool_calls ?? []) {
        if (call.type !== 'function') throw new Error('not a function call');
        const tool = tools.find((t) => t.function.name === call.function.name);
        expect(tool, call.function.name).toBeDefined();
        expect(ajv.validate(tool!.function.parameters, JSON.parse(call.function.arguments))).toBe(true);
      }
    }
    const streamed = await collect(
      await client.chat.completions.create({
        ...ask,
        tools,
        tool_choice: 'required',
        parallel_tool_calls: false,
        stream: true,
      }),
    );
    expect(streamed.finish).toBe('tool_calls');
    expect(streamed.content).toBe('');
    expect(streamed.calls).toHaveLength(1);
  });

  it('answers a named tool_choice with exactly one call of that function', async () => {
    const named = { type: 'function' as const, function: { name: 'move' } };
    const reply = await client.chat.completions.create({ ...ask, tools, tool_choice: named, n: 3, seed: 11 });
    for (const choice of reply.choices) {
      expect(choice.finish_reason).toBe('tool_calls');
      const call = choice.message.tool_calls?.[0];
      expect(choice.message.tool_calls).toHaveLength(1);
      if (call?.type !== 'function') throw new Error('not a function call');
      expect(call.function.name).toBe('move');
      expect(ajv.validate(point, JSON.parse(call.function.arguments))).toBe(true);
    }
    const streamed = await collect(
      await client.chat.completions.create({ ...ask, tools, tool_choice: named, stream: true }),
    );
    expect(streamed).toMatchObject({ finish: 'tool_calls', calls: [{ name: 'move' }] });
  });

  it('answers response_format json_schema and json_object with JSON content, streamed or not', async () => {
    const reply = await client.chat.completions.create({ ...ask, response_format: schemaFormat, n: 4 });
    for (const choice of reply.choices) {
      expect(choice.finish_reason).toBe('stop');
      expect(ajv.validate(point, JSON.parse(choice.message.content ?? ''))).toBe(true);
    }
    const streamed = await collect(
      await client.chat.completions.create({ ...ask, response_format: schemaFormat, stream: true, seed: 5 }),
    );
    expect(streamed.finish).toBe('stop');
    expect(ajv.validate(point, JSON.parse(streamed.content))).toBe(true);

    const objects = await client.chat.completions.create({
      ...ask,
      response_format: { type: 'json_object' },
      n: 4,
      max_tokens: 900,
    });
    for (const choice of objects.choices) {
      if (choice.finish_reason === 'length') continue; // a long random key can outrun any limit
      expect(choice.finish_reason).toBe('stop');
      const value: unknown = JSON.parse(choice.message.content ?? '');
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
    }
    expect(objects.choices.some((c) => c.finish_reason === 'stop')).toBe(true);
  });

  it('ends with finish_reason length where max_tokens cuts the value', async () => {
    const reply = await client.chat.completions.create({ ...ask, response_format: schemaFormat, max_tokens: 4 });
    expect(reply.choices[0]?.finish_reason).toBe('length');
    expect(reply.choices[0]?.message.content).toMatch(/^\{/);
  });

  it("reports the model's own log-probs, before the constraint, as vLLM does", async () => {
    const yesNo = { type: 'json_schema' as const, json_schema: { name: 'b', schema: { type: 'boolean' } } };
    const reply = await client.chat.completions.create({
      ...ask,
      response_format: yesNo,
      logprobs: true,
      top_logprobs: 20,
    });
    const tokens = reply.choices[0]?.logprobs?.content ?? [];
    expect(tokens.map((t) => t.token).join('')).toBe(`${reply.choices[0]?.message.content}<|end|>`);
    expect(['t', 'f']).toContain(tokens[0]?.token);
    for (const token of tokens) {
      // The unconstrained top 20 (a 264-token vocabulary), the drawn token's own log-prob among them when it ranks.
      expect(token.top_logprobs).toHaveLength(20);
      expect(token.logprob).toBeLessThanOrEqual(0);
      const listed = token.top_logprobs.find((t) => t.token === token.token);
      if (listed) expect(listed.logprob).toBe(token.logprob);
    }
    // After "t" only "rue" may follow, yet the model's own probability of each letter is below 1.
    expect(tokens.slice(1).some((t) => t.logprob < 0)).toBe(true);
  });

  it('refuses with a 400 naming it what it does not enforce', async () => {
    const refused = async (fields: object, named: RegExp) =>
      expect(client.chat.completions.create({ ...ask, ...fields })).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(named),
      });
    const pattern = { type: 'object', properties: { s: { type: 'string', pattern: '^a' } } };
    const strictFormat = { type: 'json_schema', json_schema: { name: 'p', schema: pattern, strict: true } };
    await refused({ response_format: strictFormat }, /properties\.s: the keyword "pattern" is not enforced/);
    await refused({ response_format: { type: 'regex' } }, /response_format.type: "regex" is not supported/);
    await refused({ tool_choice: 'required' }, /needs tools/);
    await refused({ tools, tool_choice: { type: 'function', function: { name: 'fly' } } }, /"fly", which is not among/);
    await refused({ tools, tool_choice: 'required', response_format: { type: 'json_object' } }, /ask for one/);
    // Without strict, the same schema is honored for what the subset enforces.
    const lenient = await client.chat.completions.create({
      ...ask,
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: pattern } },
      max_tokens: 900,
    });
    if (lenient.choices[0]?.finish_reason === 'stop')
      expect(JSON.parse(lenient.choices[0].message.content ?? '')).toBeTypeOf('object');
  });
});
