import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { Qwen3Model, readyBackend } from '../../src/policy/model.js';
import { VOCAB_SIZE } from '../../src/policy/chat-format.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';
import { startTestGateway } from '../helpers/gateway.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-policy-server-'));
let server: PolicyServer;
let client: OpenAI;
let tokenizer: ChatTokenizer;

beforeAll(async () => {
  await readyBackend();
  const config = defaultModelConfig({
    maxPositions: 64,
    hiddenSize: 16,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 8,
    intermediateSize: 32,
    numLayers: 1,
  });
  for (const [name, seed] of [
    ['v1', 1],
    ['v2', 2],
  ] as const) {
    const model = Qwen3Model.init(config, seed);
    saveCheckpoint(path.join(dir, name), model);
    model.dispose();
  }
  server = await startPolicyServer({
    host: '127.0.0.1',
    port: 0,
    models: { 'policy-v1': path.join(dir, 'v1') },
    adminKey: ADMIN,
  });
  client = new OpenAI({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
  tokenizer = ChatTokenizer.fromDirectory(path.join(dir, 'v1'));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const ADMIN = 'policy-admin-key';
const asAdmin = { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` };
const messages = [{ role: 'user' as const, content: 'hi' }];
const extra = (fields: object) => fields as object;

describe('the embedded policy server, through the openai client', () => {
  it('answers chat completions with vLLM token ids and log-probs', async () => {
    const completion = (await client.chat.completions.create({
      model: 'policy-v1',
      messages,
      max_tokens: 8,
      seed: 3,
      logprobs: true,
      ...extra({ return_token_ids: true }),
    })) as unknown as {
      prompt_token_ids: number[];
      choices: Array<{
        token_ids: number[];
        finish_reason: string;
        message: { content: string };
        logprobs: { content: Array<{ logprob: number }> };
      }>;
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    expect(completion.prompt_token_ids).toEqual(tokenizer.promptIds({ messages }));
    const [choice] = completion.choices;
    expect(choice!.token_ids.length).toBe(completion.usage.completion_tokens);
    expect(choice!.logprobs.content.map((c) => c.logprob)).toHaveLength(choice!.token_ids.length);
    expect(['stop', 'length']).toContain(choice!.finish_reason);
    expect(completion.usage.prompt_tokens).toBe(completion.prompt_token_ids.length);
  });

  it('is reproducible with a seed and gives n choices', async () => {
    const ask = () => client.chat.completions.create({ model: 'policy-v1', messages, max_tokens: 6, seed: 42, n: 3 });
    const [a, b] = [await ask(), await ask()];
    expect(a.choices.map((c) => c.message.content)).toEqual(b.choices.map((c) => c.message.content));
    expect(a.choices).toHaveLength(3);
  });

  it('streams the same reply it gives unstreamed, with per-chunk token ids', async () => {
    const whole = (await client.chat.completions.create({
      model: 'policy-v1',
      messages,
      max_tokens: 10,
      seed: 5,
      ...extra({ return_token_ids: true }),
    })) as unknown as {
      choices: Array<{ message: { content: string }; token_ids: number[] }>;
    };
    const stream = await client.chat.completions.create({
      model: 'policy-v1',
      messages,
      max_tokens: 10,
      seed: 5,
      stream: true,
      stream_options: { include_usage: true },
      ...extra({ return_token_ids: true }),
    });
    const parts: string[] = [];
    const ids: number[] = [];
    let usage: unknown;
    for await (const chunk of stream) {
      parts.push(chunk.choices[0]?.delta.content ?? '');
      ids.push(...(((chunk.choices[0] as unknown as { token_ids?: number[] }) ?? {}).token_ids ?? []));
      if (chunk.usage) usage = chunk.usage;
    }
    expect(parts.join('')).toBe(whole.choices[0]?.message.content);
    expect(ids).toEqual(whole.choices[0]?.token_ids);
    expect(usage).toMatchObject({ completion_tokens: ids.length });
  });

  it('serves completions from text or token ids', async () => {
    const fromText = await client.completions.create({
      model: 'policy-v1',
      prompt: '<|user|>x',
      max_tokens: 4,
      seed: 1,
      temperature: 0,
    });
    const fromIds = await client.completions.create({
      model: 'policy-v1',
      prompt: tokenizer.encode('<|user|>x') as unknown as string,
      max_tokens: 4,
      seed: 1,
      temperature: 0,
    });
    expect(fromIds.choices[0]?.text).toBe(fromText.choices[0]?.text);
  });

  it('streams completions token by token, the same text and ids as unstreamed', async () => {
    const body = {
      model: 'policy-v1',
      prompt: '<|user|>hello<|end|><|assistant|>',
      max_tokens: 8,
      seed: 3,
      ...extra({ return_token_ids: true }),
    };
    const whole = (await client.completions.create(body)) as unknown as {
      choices: Array<{ text: string; token_ids: number[]; finish_reason: string }>;
    };
    const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const chunks: Array<{
      text: string;
      token_ids?: number[];
      prompt_token_ids?: number[];
      finish_reason: string | null;
    }> = [];
    let usage: unknown;
    for await (const chunk of stream) {
      if (chunk.choices[0]) chunks.push(chunk.choices[0] as unknown as (typeof chunks)[number]);
      if (chunk.usage) usage = chunk.usage;
    }
    const ids = chunks.flatMap((c) => c.token_ids ?? []);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((c) => c.text).join('')).toBe(whole.choices[0]?.text);
    expect(ids).toEqual(whole.choices[0]?.token_ids);
    expect(chunks[0]?.prompt_token_ids).toEqual(tokenizer.encode('<|user|>hello<|end|><|assistant|>'));
    expect(chunks.slice(1).every((c) => c.prompt_token_ids === undefined)).toBe(true);
    expect(chunks.at(-1)?.finish_reason).toBe(whole.choices[0]?.finish_reason);
    expect(usage).toMatchObject({ completion_tokens: ids.length });
  });

  it('loads and unloads policy versions at runtime, and names unknown models', async () => {
    await expect(client.chat.completions.create({ model: 'policy-v2', messages, max_tokens: 2 })).rejects.toMatchObject(
      { status: 404, message: expect.stringContaining('policy-v2') },
    );
    const loaded = await fetch(`${server.url}/load_lora_adapter`, {
      method: 'POST',
      headers: asAdmin,
      body: JSON.stringify({ lora_name: 'policy-v2', lora_path: path.join(dir, 'v2') }),
    });
    expect(loaded.status).toBe(200);
    expect((await client.models.list()).data.map((m) => m.id).sort()).toEqual(['policy-v1', 'policy-v2']);
    const [one, two] = await Promise.all(
      ['policy-v1', 'policy-v2'].map((model) =>
        client.chat.completions.create({ model, messages, max_tokens: 6, seed: 9, temperature: 0 }),
      ),
    );
    expect(one?.choices[0]?.message.content).not.toBe(two?.choices[0]?.message.content);
    const unloaded = await fetch(`${server.url}/unload_lora_adapter`, {
      method: 'POST',
      headers: asAdmin,
      body: JSON.stringify({ lora_name: 'policy-v2' }),
    });
    expect(unloaded.status).toBe(200);
    await expect(client.chat.completions.create({ model: 'policy-v2', messages, max_tokens: 2 })).rejects.toMatchObject(
      { status: 404 },
    );
    const bad = await fetch(`${server.url}/load_lora_adapter`, {
      method: 'POST',
      headers: asAdmin,
      body: JSON.stringify({ lora_name: 'x', lora_path: path.join(dir, 'nowhere') }),
    });
    expect(bad.status).toBe(400);
    // A served name is a routing name like any other: the gateway routes to it by that name.
    for (const name of ['../x y', '__proto__', 'v'.repeat(300)]) {
      const refused = await fetch(`${server.url}/load_lora_adapter`, {
        method: 'POST',
        headers: asAdmin,
        body: JSON.stringify({ lora_name: name, lora_path: path.join(dir, 'v2') }),
      });
      expect(refused.status, name).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/letters, digits/);
    }
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(['policy-v1']);
  });

  it('loads and unloads only for its admin key, and refuses both when it has none', async () => {
    const post = (url: string, route: string, headers: Record<string, string>, body: object) =>
      fetch(`${url}/${route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    for (const headers of [{}, { authorization: 'Bearer wrong' }, { authorization: ADMIN }] as Array<
      Record<string, string>
    >) {
      const unload = await post(server.url, 'unload_lora_adapter', headers, { lora_name: 'policy-v1' });
      expect(unload.status).toBe(401);
      expect(await unload.json()).toMatchObject({
        error: { code: 401, message: expect.stringContaining('Authorization: Bearer') },
      });
      expect(
        (await post(server.url, 'load_lora_adapter', headers, { lora_name: 'x', lora_path: path.join(dir, 'v2') }))
          .status,
      ).toBe(401);
    }
    expect(server.models()).toEqual(['policy-v1']);

    const keyless = await startPolicyServer({
      host: '127.0.0.1',
      port: 0,
      models: { 'policy-v1': path.join(dir, 'v1') },
    });
    try {
      const refused = await post(
        keyless.url,
        'unload_lora_adapter',
        { authorization: 'Bearer anything' },
        { lora_name: 'policy-v1' },
      );
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({
        error: { code: 403, message: expect.stringContaining('admin key') },
      });
      expect(keyless.models()).toEqual(['policy-v1']);
    } finally {
      await keyless.close();
    }
  });

  it('lists its models by name, never by where their checkpoints lie', async () => {
    const listed = await (await fetch(`${server.url}/models`)).text();
    expect(listed).not.toContain(dir);
    expect(JSON.parse(listed)).toMatchObject({ data: [{ id: 'policy-v1', root: 'policy-v1' }] });
  });

  it('answers a prompt that is only the end token, streamed or not, and refuses ids outside the vocabulary', async () => {
    const endOfText = tokenizer.encode('<|endoftext|>');
    for (const prompt of ['<|endoftext|>', endOfText as unknown as string]) {
      const whole = await client.completions.create({ model: 'policy-v1', prompt, max_tokens: 3, seed: 1 });
      expect(['stop', 'length']).toContain(whole.choices[0]?.finish_reason);
      const stream = await client.completions.create({
        model: 'policy-v1',
        prompt,
        max_tokens: 3,
        seed: 1,
        stream: true,
      });
      const finishes: Array<string | null> = [];
      for await (const chunk of stream) finishes.push(chunk.choices[0]?.finish_reason ?? null);
      expect(finishes.at(-1)).toBe(whole.choices[0]?.finish_reason);
    }
    // One past the last id (the vocabulary's end), and far outside it: a bad request, streamed or not.
    for (const id of [VOCAB_SIZE, 100_000]) {
      for (const stream of [false, true]) {
        const answer = await fetch(`${server.url}/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'policy-v1', prompt: [id], max_tokens: 2, stream }),
        });
        expect(answer.status).toBe(400);
        expect(await answer.json()).toMatchObject({
          error: { code: 400, message: expect.stringContaining(`token id ${id} is outside the vocabulary`) },
        });
      }
    }
  });

  it('finishes the replies a version is generating when it is unloaded, then serves it no more', async () => {
    const load = () =>
      fetch(`${server.url}/load_lora_adapter`, {
        method: 'POST',
        headers: asAdmin,
        body: JSON.stringify({ lora_name: 'leaving', lora_path: path.join(dir, 'v2') }),
      });
    const body = { model: 'leaving', prompt: '<|user|>x', max_tokens: 30, seed: 4 };
    await load();
    const whole = await client.completions.create(body);
    const stream = await client.completions.create({ ...body, stream: true });
    const parts: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      // Its weights used to be freed under the running generation, which then never ended.
      if (server.models().includes('leaving'))
        expect(
          (
            await fetch(`${server.url}/unload_lora_adapter`, {
              method: 'POST',
              headers: asAdmin,
              body: JSON.stringify({ lora_name: 'leaving' }),
            })
          ).status,
        ).toBe(200);
      parts.push(chunk.choices[0]?.text ?? '');
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(parts.join('')).toBe(whole.choices[0]?.text);
    expect(finish).toBe(whole.choices[0]?.finish_reason);
    await expect(client.completions.create(body)).rejects.toMatchObject({ status: 404 });
    expect((await load()).status).toBe(200);
    expect((await client.completions.create(body)).choices[0]?.text).toBe(whole.choices[0]?.text);
  });

  it('answers bad URLs, unknown routes and bodies over the limit in its error shape', async () => {
    const badUrl = await fetch(`${server.url.replace(/\/v1$/, '')}/v1/%E0%A4%A`);
    expect(badUrl.status).toBe(400);
    expect(await badUrl.json()).toMatchObject({ error: { code: 400, message: expect.any(String) } });
    const unknown = await fetch(`${server.url}/nothing-here`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({
      error: { code: 404, message: expect.stringContaining('/v1/nothing-here') },
    });
    const huge = await fetch(`${server.url}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'policy-v1', prompt: 'x'.repeat(17 * 1024 * 1024) }),
    });
    expect(huge.status).toBe(413);
    expect(await huge.json()).toMatchObject({
      error: { code: 413, message: expect.stringContaining('over the limit') },
    });
    // A key named __proto__ is JSON the server refuses on purpose: it says so, not "invalid JSON".
    const proto = await fetch(`${server.url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model": "policy-v1", "messages": [], "__proto__": {"x": 1}}',
    });
    expect(proto.status).toBe(400);
    expect(((await proto.json()) as { error: { message: string } }).error.message).toMatch(
      /^the JSON body has a key named __proto__/,
    );
    const longUrl = await fetch(`${server.url}/models?${'a'.repeat(40_000)}`);
    expect(longUrl.status).toBe(431);
    expect(await longUrl.json()).toMatchObject({
      error: { code: 431, message: expect.stringContaining('shorter URL') },
    });
  });

  it('refuses a prompt over the context naming the limit, and bad parameters', async () => {
    await expect(
      client.chat.completions.create({ model: 'policy-v1', messages: [{ role: 'user', content: 'x'.repeat(100) }] }),
    ).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining('maximum context length is 64 tokens'),
    });
    await expect(
      client.chat.completions.create({ model: 'policy-v1', messages, temperature: -1 }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining('temperature') });
  });

  it('reads text parts as vLLM does, and refuses an image part naming its type and the fix', async () => {
    const parts = (await client.chat.completions.create({
      model: 'policy-v1',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'h' },
            { type: 'text', text: 'i' },
          ],
        },
      ],
      max_tokens: 1,
      ...extra({ return_token_ids: true }),
    })) as unknown as { prompt_token_ids: number[] };
    expect(parts.prompt_token_ids).toEqual(tokenizer.promptIds({ messages: [{ role: 'user', content: 'h\ni' }] }));
    const image = { type: 'image_url' as const, image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
    await expect(
      client.chat.completions.create({
        model: 'policy-v1',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, image] }],
      }),
    ).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/content\[1\]: content part type 'image_url' is not supported.*text parts/),
    });
  });

  it('batches concurrent requests and keeps each reproducible', async () => {
    const alone = await client.chat.completions.create({ model: 'policy-v1', messages, max_tokens: 8, seed: 77 });
    const crowd = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        client.chat.completions.create({
          model: 'policy-v1',
          messages: [{ role: 'user', content: `q${i}` }],
          max_tokens: 8,
          seed: 77 + i,
        }),
      ),
    );
    const again = await client.chat.completions.create({ model: 'policy-v1', messages, max_tokens: 8, seed: 77 });
    expect(again.choices[0]?.message.content).toBe(alone.choices[0]?.message.content);
    expect(crowd).toHaveLength(6);
  });
});

describe('the embedded policy server behind the gateway', () => {
  it('is journaled with its own token ids and log-probs, which match its tokenizer', async () => {
    const t = await startTestGateway();
    try {
      t.gateway.router.update({
        backends: { embedded: { endpoints: [server.url], tokenIds: true, logprobs: true } },
        policies: { 'policy-v1': { backend: 'embedded', model: 'policy-v1' } },
        aliases: { production: 'policy-v1' },
      });
      const { id, client: harness } = await t.rollout();
      const reply = await harness.chat.completions.create({ model: 'production', messages, max_tokens: 6, seed: 1 });
      expect(reply).not.toHaveProperty('prompt_token_ids');
      const [call] = await t.store.listCalls(id);
      expect(call?.promptIds).toEqual(tokenizer.promptIds({ messages }));
      const completion = call?.choices?.[0];
      expect(completion?.completionIds?.length).toBeGreaterThan(0);
      expect(completion?.logprobs).toHaveLength(completion?.completionIds?.length ?? -1);
      const text = tokenizer.decode(completion?.completionIds ?? []).replace('<|end|>', '');
      expect(text).toBe(reply.choices[0]?.message.content);
    } finally {
      await t.close();
    }
  });
});
