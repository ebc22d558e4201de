import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { familiesOf, scrape, valueOf } from '../helpers/prometheus.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t?.close();
});

const metricsUrl = () => `${t.gateway.url}/metrics`;

describe('gateway /metrics, scraped as Prometheus does', () => {
  it('needs the admin key as a bearer token, and no rollout key will do', async () => {
    const { key } = await t.rollout();
    expect((await scrape(metricsUrl())).status).toBe(401);
    expect((await scrape(metricsUrl(), key)).status).toBe(403);
    const ok = await scrape(metricsUrl(), ADMIN_KEY);
    expect(ok.status).toBe(200);
    expect(ok.contentType).toContain('text/plain');
    // Node's own process metrics are there, under the gateway's registry.
    expect(valueOf(ok.samples, 'process_cpu_user_seconds_total')).toBeGreaterThanOrEqual(0);
    expect(familiesOf(ok.text).get('rein_gateway_calls_total')).toBe('counter');
    expect(familiesOf(ok.text).get('rein_gateway_call_duration_seconds')).toBe('histogram');
  });

  it('counts exactly the calls made: 3 ok (one streamed) and 1 upstream error, with latency, tokens and journal writes', async () => {
    const before = (await scrape(metricsUrl(), ADMIN_KEY)).samples;
    const { client } = await t.rollout();
    const usage = { prompt: 0, completion: 0 };
    for (const content of ['one', 'two']) {
      const reply = await client.chat.completions.create({
        model: 'production',
        messages: [{ role: 'user', content }],
      });
      usage.prompt += reply.usage?.prompt_tokens ?? NaN;
      usage.completion += reply.usage?.completion_tokens ?? NaN;
    }
    const stream = await client.chat.completions.create({
      model: 'production',
      messages: [{ role: 'user', content: 'three' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      if (chunk.usage) {
        usage.prompt += chunk.usage.prompt_tokens;
        usage.completion += chunk.usage.completion_tokens;
      }
    }
    await expect(
      client.chat.completions.create({ model: 'fault:500', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toMatchObject({ status: 500 });

    const after = (await scrape(metricsUrl(), ADMIN_KEY)).samples;
    const moved = (name: string, labels: Record<string, string> = {}) =>
      (valueOf(after, name, labels) ?? 0) - (valueOf(before, name, labels) ?? 0);
    const chat = { endpoint: 'chat.completions' };
    expect(moved('rein_gateway_calls_total', { ...chat, status: 'ok', error_class: '' })).toBe(3);
    expect(moved('rein_gateway_calls_total', { ...chat, status: 'error', error_class: 'upstream_http_error' })).toBe(1);
    expect(moved('rein_gateway_call_duration_seconds_count', { ...chat, status: 'ok' })).toBe(3);
    expect(moved('rein_gateway_call_duration_seconds_count', { ...chat, status: 'error' })).toBe(1);
    expect(moved('rein_gateway_call_duration_seconds_sum', { ...chat, status: 'ok' })).toBeGreaterThan(0);
    // Every call that reached the backend had a first byte, the error's included.
    expect(moved('rein_gateway_time_to_first_token_seconds_count', chat)).toBe(4);
    expect(usage.prompt).toBeGreaterThan(0);
    expect(moved('rein_gateway_prompt_tokens_total', chat)).toBe(usage.prompt);
    expect(moved('rein_gateway_completion_tokens_total', chat)).toBe(usage.completion);
    expect(moved('rein_gateway_journal_write_seconds_count', { operation: 'begin' })).toBe(4);
    expect(moved('rein_gateway_journal_write_seconds_count', { operation: 'finish' })).toBe(4);
    expect(valueOf(after, 'rein_gateway_calls_in_flight')).toBe(0);
  });

  it('shows a call in flight while the backend holds it, and none once it is answered', async () => {
    const { client } = await t.rollout();
    const held = client.chat.completions.create({ model: 'fault:hold', messages: [{ role: 'user', content: 'wait' }] });
    await vi.waitFor(() => expect(t.backend.held()).toBe(1), { timeout: 30_000, interval: 20 });
    expect(valueOf((await scrape(metricsUrl(), ADMIN_KEY)).samples, 'rein_gateway_calls_in_flight')).toBe(1);
    t.backend.release();
    await held;
    expect(valueOf((await scrape(metricsUrl(), ADMIN_KEY)).samples, 'rein_gateway_calls_in_flight')).toBe(0);
  });
});
