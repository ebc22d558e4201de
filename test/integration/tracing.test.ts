import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { localExecutor } from '../../src/rollouts/local-executor.js';
import { runRollouts, type VerifierSpec } from '../../src/rollouts/runner.js';
import type { TracingOptions } from '../../src/telemetry/gateway-tracing.js';
import { rolloutTraceIds, rolloutTraceparent, toolSpanId } from '../../src/telemetry/trace-ids.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { parentOf, startJaeger, tagsOf, type Jaeger, type JaegerSpan, type JaegerTrace } from '../helpers/jaeger.js';

// Against a real OTLP backend: Jaeger's all-in-one (scripts/build-jaeger.sh builds it).
const example = path.resolve(import.meta.dirname, '../../examples/calculator-agent');
const fixtures = path.resolve(import.meta.dirname, '../fixtures/harnesses');
const verifier: VerifierSpec = {
  command: process.execPath,
  args: [path.join(example, 'verifier.mjs'), '{task}', '{output}'],
  timeoutMs: 20_000,
};
const SECRET = 'sk-live0123456789abcdefXYZ';

let jaeger: Jaeger;
let t: TestGateway;
let workDir: string;
const tracing = (overrides: Partial<TracingOptions> = {}): TracingOptions => ({
  endpoint: jaeger.otlpUrl,
  headers: {},
  serviceName: 'rein-gateway-test',
  content: true,
  maxQueueSize: 2048,
  batchDelayMs: 50,
  exportTimeoutMs: 10_000,
  ...overrides,
});

beforeAll(async () => {
  jaeger = await startJaeger();
  t = await startTestGateway({ gateway: { tracing: tracing() } });
  workDir = mkdtempSync(path.join(os.tmpdir(), 'rein-tracing-'));
}, 60_000);
afterAll(async () => {
  await t?.close();
  await jaeger?.close();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

/** The trace once it holds spans that satisfy `complete` (spans arrive in batches, from several senders). */
async function traceWhen(traceId: string, complete: (trace: JaegerTrace) => boolean): Promise<JaegerTrace> {
  for (;;) {
    const trace = await jaeger.trace(traceId);
    if (trace && complete(trace)) return trace;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const named = (trace: JaegerTrace, name: string) => trace.spans.filter((s) => s.operationName === name);
const one = (trace: JaegerTrace, name: string): JaegerSpan => {
  const spans = named(trace, name);
  expect(spans, `spans named ${name}`).toHaveLength(1);
  return spans[0]!;
};
const eventsOf = (span: JaegerSpan) => span.logs.map((l) => Object.fromEntries(l.fields.map((f) => [f.key, f.value])));

describe('OpenTelemetry traces, in Jaeger', () => {
  it('makes a rollout one trace: its root span, the GenAI call spans under the harness span, tool spans, the reward', async () => {
    const control = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
    const harness = localExecutor({
      command: process.execPath,
      args: [path.join(fixtures, 'traced.mjs'), '{task}', '{output}'],
      env: { HARNESS_OTLP_URL: jaeger.otlpUrl },
      timeoutMs: 20_000,
    });
    const [outcome] = await runRollouts(
      {
        batchId: 'traced',
        tasks: [{ id: 'six-seven', question: '6*7', answer: 42 }],
        samplesPerTask: 1,
        mode: 'train',
        policyVersion: 'policy-v1',
        hiddenFields: ['answer'],
        rewardWeights: { success: 1 },
        concurrency: 1,
        maxAttempts: 1,
        workDir,
      },
      { gateway: control, harness, verifier },
    );
    expect(outcome).toMatchObject({ status: 'succeeded', reward: 1 });
    const rolloutId = 'traced.six-seven.0';
    const { traceId, rootSpanId } = rolloutTraceIds(rolloutId, 1);
    // Rein handed the harness the rollout's trace context; the harness's spans are in that trace.
    const seen = JSON.parse(readFileSync(path.join(workDir, rolloutId, 'attempt-1', 'output.json'), 'utf8')).trace;
    expect(seen.fromRein).toBe(rolloutTraceparent(rolloutId, 1));
    expect(seen.traceId).toBe(traceId);

    const calls = await t.store.listCalls(rolloutId);
    expect(calls).toHaveLength(2);
    const trace = await traceWhen(traceId, (tr) => tr.spans.length >= 6);
    expect(trace.spans.map((s) => s.operationName).sort()).toEqual([
      'agent run',
      'chat production',
      'chat production',
      'execute_tool calc',
      'execute_tool deploy',
      'rein.rollout',
    ]);

    // The root: the rollout attempt, from creation to final status, with the verifier's reward as an event.
    const root = one(trace, 'rein.rollout');
    expect(root.spanID).toBe(rootSpanId);
    expect(root.references).toEqual([]);
    expect(trace.processes[root.processID]?.serviceName).toBe('rein-gateway-test');
    expect(tagsOf(root)).toMatchObject({
      'rein.rollout.id': rolloutId,
      'rein.rollout.attempt': 1,
      'rein.rollout.status': 'succeeded',
      'rein.rollout.mode': 'train',
      'rein.task.id': 'six-seven',
      'rein.policy.version': 'policy-v1',
      'rein.batch.id': 'traced',
      'rein.reward': 1,
      'otel.status_code': 'OK',
    });
    const rollout = (await t.store.getRollout(rolloutId))!;
    expect(root.startTime).toBe(Date.parse(rollout.createdAt) * 1000);
    const reward = eventsOf(root).find((e) => e.event === 'rein.reward');
    expect(reward).toMatchObject({
      'rein.reward.value': 1,
      'rein.reward.source': 'verifier',
      'rein.reward.component.success': 1,
      'rein.reward.component.format': 1,
    });
    expect(
      eventsOf(root)
        .filter((e) => e.event === 'rein.status')
        .map((e) => e['rein.status.to']),
    ).toEqual(['running', 'succeeded']);

    // The harness's own span is the root's child; Rein's call spans are the harness span's children.
    const agent = one(trace, 'agent run');
    expect(agent.spanID).toBe(seen.agentSpanId);
    expect(parentOf(agent)).toBe(rootSpanId);
    const callSpans = named(trace, 'chat production').sort((a, b) => a.startTime - b.startTime);
    for (const [i, span] of callSpans.entries()) {
      const call = calls[i]!;
      const usage = call.usage as { prompt_tokens: number; completion_tokens: number };
      expect(parentOf(span)).toBe(seen.agentSpanId);
      expect(tagsOf(span)).toMatchObject({
        'span.kind': 'client',
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'production',
        'gen_ai.response.model': 'toy-model',
        'gen_ai.request.temperature': 0.5,
        'gen_ai.request.max_tokens': 40,
        'gen_ai.usage.input_tokens': usage.prompt_tokens,
        'gen_ai.usage.output_tokens': usage.completion_tokens,
        'rein.rollout.id': rolloutId,
        'rein.rollout.attempt': 1,
        'rein.call.id': call.id,
        'rein.policy.version': 'policy-v1',
        'rein.call.status': 'ok',
      });
      expect(JSON.parse(String(tagsOf(span)['gen_ai.response.finish_reasons']))).toEqual([
        call.choices![0]!.finishReason,
      ]);
      expect(typeof tagsOf(span)['rein.call.ttft_ms']).toBe('number');
      expect(span.startTime).toBe(call.startedAt * 1000);
    }
    expect(callSpans.map((s) => JSON.parse(String(tagsOf(s)['gen_ai.response.finish_reasons'])))).toEqual([
      ['tool_calls'],
      ['stop'],
    ]);
    // The backend got Rein's call span as its parent, so a backend's own spans (vLLM traces too) nest under the call.
    const forwarded = t.backend.requests
      .filter((r) => r.headers.traceparent?.includes(traceId))
      .map((r) => r.headers.traceparent);
    expect(forwarded).toEqual(callSpans.map((s) => `00-${traceId}-${s.spanID}-01`));

    // Tool spans, with latency, permission and failure category: the child of the root, or of the span the report names
    // in its traceparent.
    const calc = one(trace, 'execute_tool calc');
    expect(parentOf(calc)).toBe(rootSpanId);
    expect(tagsOf(calc)).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'calc',
      'rein.tool.permission': 'allowed',
      'rein.tool.reported_by': 'harness',
    });
    expect(JSON.parse(String(tagsOf(calc)['gen_ai.tool.call.arguments']))).toEqual({ x: '6*7' });
    const deploy = one(trace, 'execute_tool deploy');
    expect(deploy.spanID).toBe(toolSpanId(rolloutId, 1, 'deploy-1'));
    expect(parentOf(deploy)).toBe(seen.agentSpanId);
    expect(deploy.duration).toBe(3000);
    expect(tagsOf(deploy)).toMatchObject({
      'rein.tool.permission': 'denied',
      'rein.tool.failure': 'permission_denied',
      'error.type': 'permission_denied',
      'otel.status_code': 'ERROR',
    });
    // The deploy span was reported twice and sent once: Rein sent the rollout, 2 calls and 2 tool spans, nothing more.
    const tracer = t.gateway.tracing!;
    while (tracer.stats().queued > 0) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(tracer.stats()).toEqual({ exported: 5, dropped: 0, queued: 0 });
  }, 60_000);

  it('records messages only when enabled, and then redacted; without a traceparent a call is the rollout root span’s child', async () => {
    const quiet = await startTestGateway({
      gateway: { tracing: tracing({ content: false, serviceName: 'rein-gateway-quiet' }) },
    });
    try {
      const traced: Array<{ id: string; serviceName: string }> = [];
      for (const [gateway, serviceName] of [
        [t, 'rein-gateway-test'],
        [quiet, 'rein-gateway-quiet'],
      ] as const) {
        const rollout = await gateway.rollout({ taskId: 'secret' });
        await rollout.client.chat.completions.create({
          model: 'production',
          messages: [{ role: 'user', content: `deploy with ${SECRET}` }],
        });
        expect(
          (await gateway.admin('POST', `/api/rollouts/${rollout.id}/status`, { status: 'succeeded' })).status,
        ).toBe(200);
        traced.push({ id: rollout.id, serviceName });
      }
      for (const { id, serviceName } of traced) {
        const { traceId, rootSpanId } = rolloutTraceIds(id, 1);
        const trace = await traceWhen(traceId, (tr) => tr.spans.length >= 2);
        const call = one(trace, 'chat production');
        expect(parentOf(call)).toBe(rootSpanId);
        expect(trace.processes[call.processID]?.serviceName).toBe(serviceName);
        const tags = tagsOf(call);
        expect(JSON.stringify(trace)).not.toContain(SECRET);
        if (serviceName === 'rein-gateway-quiet') {
          expect(tags['gen_ai.input.messages']).toBeUndefined();
          expect(tags['gen_ai.output.messages']).toBeUndefined();
          continue;
        }
        const input = JSON.parse(String(tags['gen_ai.input.messages']));
        expect(input).toEqual([
          { role: 'user', parts: [{ type: 'text', content: 'deploy with [REDACTED:openai-key]' }] },
        ]);
        const output = JSON.parse(String(tags['gen_ai.output.messages']));
        expect(output).toEqual([
          {
            role: 'assistant',
            parts: [{ type: 'text', content: 'Echo: deploy with [REDACTED:openai-key]' }],
            finish_reason: 'stop',
          },
        ]);
      }
    } finally {
      await quiet.close();
    }
  }, 60_000);

  it('ends a lost attempt’s trace when the next attempt starts, and gives each attempt its own trace', async () => {
    const rollout = await t.rollout({ taskId: 'retried' });
    await rollout.client.chat.completions.create({
      model: 'production',
      messages: [{ role: 'user', content: 'first try' }],
    });
    const next = await t.admin('POST', `/api/rollouts/${rollout.id}/attempts`);
    expect(next.body.traceparent).toBe(rolloutTraceparent(rollout.id, 2));
    const first = await traceWhen(rolloutTraceIds(rollout.id, 1).traceId, (tr) => tr.spans.length >= 2);
    expect(tagsOf(one(first, 'rein.rollout'))).toMatchObject({
      'rein.rollout.attempt': 1,
      'rein.rollout.status': 'retried',
      'otel.status_code': 'ERROR',
    });
    expect(one(first, 'chat production')).toBeDefined();

    const { default: OpenAI } = await import('openai');
    const second = new OpenAI({ apiKey: next.body.key, baseURL: next.body.baseUrl, maxRetries: 0 });
    // Streamed: the span has the time to the first chunk, and usage counted from the token ids.
    const stream = await second.chat.completions.create({
      model: 'production',
      messages: [{ role: 'user', content: 'second try' }],
      stream: true,
    });
    for await (const _chunk of stream);
    await t.admin('POST', `/api/rollouts/${rollout.id}/status`, {
      status: 'failed',
      failureClass: 'model',
      reason: 'wrong answer',
    });
    const trace = await traceWhen(rolloutTraceIds(rollout.id, 2).traceId, (tr) => tr.spans.length >= 2);
    const root = one(trace, 'rein.rollout');
    const call = (await t.store.listCalls(rollout.id, 2))[0]!;
    expect(tagsOf(root)).toMatchObject({
      'rein.rollout.attempt': 2,
      'rein.rollout.status': 'failed',
      'rein.rollout.failure_class': 'model',
      'otel.status_code': 'ERROR',
    });
    // A later attempt starts at its first record: here its call.
    expect(root.startTime).toBe(call.startedAt * 1000);
    const streamed = one(trace, 'chat production');
    expect(parentOf(streamed)).toBe(root.spanID);
    const usage = call.usage as { prompt_tokens: number; completion_tokens: number };
    expect(tagsOf(streamed)).toMatchObject({
      'gen_ai.request.stream': true,
      'gen_ai.usage.input_tokens': usage.prompt_tokens,
      'gen_ai.usage.output_tokens': usage.completion_tokens,
      'rein.call.ttft_ms': call.ttftMs,
    });
    expect(tagsOf(streamed)['gen_ai.response.time_to_first_chunk']).toBeCloseTo(call.ttftMs! / 1000, 6);
  }, 60_000);
});
