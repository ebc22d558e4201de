import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultModelConfig, saveCheckpoint } from '../../src/policy/checkpoint.js';
import { Qwen3Model, readyBackend } from '../../src/policy/model.js';
import { startPolicyServer, type PolicyServer } from '../../src/policy/server.js';
import { familiesOf, scrape, valueOf } from '../helpers/prometheus.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-policy-metrics-'));
let server: PolicyServer;
let client: OpenAI;

beforeAll(async () => {
  await readyBackend();
  const model = Qwen3Model.init(
    defaultModelConfig({
      maxPositions: 64,
      hiddenSize: 16,
      numHeads: 2,
      numKvHeads: 1,
      headDim: 8,
      intermediateSize: 32,
      numLayers: 1,
    }),
    1,
  );
  saveCheckpoint(path.join(dir, 'v1'), model);
  model.dispose();
  server = await startPolicyServer({ host: '127.0.0.1', port: 0, models: { 'policy-v1': path.join(dir, 'v1') } });
  client = new OpenAI({ apiKey: 'unused', baseURL: server.url, maxRetries: 0 });
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const metricsUrl = () => server.url.replace(/\/v1$/, '/metrics');

describe('the embedded policy server /metrics, scraped as Prometheus does', () => {
  it('counts requests by route and code, and the tokens it read and generated', async () => {
    const first = await scrape(metricsUrl());
    expect(first.status).toBe(200);
    expect(familiesOf(first.text).get('rein_policy_server_generated_tokens_total')).toBe('counter');
    expect(valueOf(first.samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    const before = first.samples;

    const messages = [{ role: 'user' as const, content: 'hi' }];
    const chat = await client.chat.completions.create({ model: 'policy-v1', messages, max_tokens: 6, seed: 1, n: 2 });
    const stream = await client.completions.create({
      model: 'policy-v1',
      prompt: 'hello',
      max_tokens: 5,
      seed: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed = { prompt_tokens: 0, completion_tokens: 0 };
    for await (const chunk of stream) if (chunk.usage) streamed = chunk.usage;
    await expect(client.chat.completions.create({ model: 'no-such-model', messages })).rejects.toMatchObject({
      status: 404,
    });

    const after = (await scrape(metricsUrl())).samples;
    const moved = (name: string, labels: Record<string, string> = {}) =>
      (valueOf(after, name, labels) ?? 0) - (valueOf(before, name, labels) ?? 0);
    expect(moved('rein_policy_server_requests_total', { route: '/v1/chat/completions', code: '200' })).toBe(1);
    expect(moved('rein_policy_server_requests_total', { route: '/v1/chat/completions', code: '404' })).toBe(1);
    expect(moved('rein_policy_server_requests_total', { route: '/v1/completions', code: '200' })).toBe(1);
    expect(moved('rein_policy_server_generated_tokens_total')).toBe(
      (chat.usage?.completion_tokens ?? NaN) + streamed.completion_tokens,
    );
    // Each of the chat's two choices prefilled its prompt.
    expect(moved('rein_policy_server_prompt_tokens_total')).toBe(
      2 * (chat.usage?.prompt_tokens ?? NaN) + streamed.prompt_tokens,
    );
    expect(moved('rein_policy_server_row_duration_seconds_count')).toBe(3);
    expect(valueOf(after, 'rein_policy_server_queue_depth')).toBe(0);
  });
});
