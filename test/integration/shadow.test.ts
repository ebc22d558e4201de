import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { GatewayControlClient } from '../../src/gateway/control-client.js';
import { formatShadowReport, shadowReport } from '../../src/shadow/report.js';
import type { ShadowCallRecord } from '../../src/store/trace-store.js';
import { ADMIN_KEY, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MODEL, tokenize } from '../helpers/vllm-like-server.js';

/** In everything the candidate says, so a leak of its output to the harness cannot go unseen. */
const MARKER = 'CANDIDATE-MARKER';

interface CandidateServer {
  url: string;
  requests: Array<Record<string, unknown>>;
  /** Requests whose connection went away before they were answered. */
  aborted: number;
  /** When (performance.now()) each request saying `hold` arrived; each waits for `release()`. */
  held: number[];
  /** Answers every held request; returns when (performance.now()) it did. */
  release(): number;
  close(): Promise<void>;
}

/**
 * The candidate policy's backend: vLLM's non-streamed chat shape (the gateway never streams a
 * shadow request), answering so each kind of disagreement with the toy production model shows.
 * Production echoes a message and, given tools, calls the first with the message as argument;
 * this candidate, by the user's message:
 *   agree…        echoes it, as production does (the same action)
 *   6*7 (tools)   the same tool with other arguments
 *   look it up    another tool
 *   just answer   an answer where production calls a tool
 *   crash         a 500
 *   hold          its answer once the test calls release(); hang: no answer at all
 *   anything else another answer
 */
async function startCandidate(): Promise<CandidateServer> {
  const holding: Array<() => void> = [];
  const server: CandidateServer = {
    url: '',
    requests: [],
    aborted: 0,
    held: [],
    release: () => {
      const at = performance.now();
      holding.splice(0).forEach((answer) => answer());
      return at;
    },
    close: async () => {},
  };
  const http500 = { error: { message: 'engine crashed', type: 'InternalServerError', param: null, code: 500 } };
  const httpServer = http.createServer((req, res) => {
    const pieces: Buffer[] = [];
    req.on('data', (d: Buffer) => pieces.push(d));
    req.on('end', () => {
      res.on('close', () => {
        if (!res.writableFinished) server.aborted++;
      });
      const body = JSON.parse(Buffer.concat(pieces).toString()) as Record<string, unknown>;
      server.requests.push(body);
      const messages = body.messages as Array<{ role: string; content: string }>;
      const said = messages.at(-1)?.content ?? '';
      if (body.stream === true)
        return send(res, 400, {
          error: { message: 'a shadow request must not stream', type: 'BadRequestError', param: null, code: 400 },
        });
      if (said.includes('crash')) return send(res, 500, http500);
      if (said.includes('hang')) return;
      if (said.includes('hold')) {
        server.held.push(performance.now());
        holding.push(() => send(res, 200, completion(body, said)));
        return;
      }
      send(res, 200, completion(body, said));
    });
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  server.url = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/v1`;
  server.close = () =>
    new Promise((resolve) => {
      httpServer.closeAllConnections();
      httpServer.close(() => resolve());
    });
  return server;
}

function completion(body: Record<string, unknown>, said: string) {
  const hasTools = Array.isArray(body.tools) && body.tools.length > 0;
  let message: Record<string, unknown>;
  if (hasTools && said === '6*7') message = toolMessage('calculator', { expression: `42 ${MARKER}` });
  else if (hasTools && said === 'look it up') message = toolMessage('search', { query: `${said} ${MARKER}` });
  else if (said.startsWith('agree')) message = { role: 'assistant', content: `Echo: ${said}` };
  else message = { role: 'assistant', content: `${MARKER} ${said}` };
  const text = typeof message.content === 'string' ? message.content : JSON.stringify(message.tool_calls);
  return {
    id: 'chatcmpl-candidate',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: body.model,
    choices: [
      {
        index: 0,
        message,
        logprobs:
          body.logprobs === true
            ? { content: tokenize(text).map((id) => ({ token: String.fromCharCode(id), logprob: -0.5 })) }
            : null,
        finish_reason: message.tool_calls ? 'tool_calls' : 'stop',
        ...(body.return_token_ids === true && { token_ids: tokenize(text) }),
      },
    ],
    usage: { prompt_tokens: 3, completion_tokens: text.length, total_tokens: 3 + text.length },
    ...(body.return_token_ids === true && { prompt_token_ids: [1, 2, 3] }),
  };
}

function toolMessage(name: string, args: Record<string, unknown>) {
  return {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_c', type: 'function', function: { name, arguments: JSON.stringify(args) } }],
  };
}

function send(res: http.ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const tools = [
  {
    type: 'function' as const,
    function: {
      name: 'calculator',
      description: 'evaluates arithmetic',
      parameters: { type: 'object', properties: { expression: { type: 'string' } } },
    },
  },
];

/** Adds the candidate's backend (and a dead one) to a test gateway and registers their policies. */
async function withCandidates(t: TestGateway, candidate: CandidateServer): Promise<GatewayControlClient> {
  const table = t.gateway.router['table'];
  t.gateway.router.update({
    ...table,
    backends: {
      ...table.backends,
      candidate: { endpoints: [candidate.url], tokenIds: true, logprobs: true },
      dead: { endpoints: ['http://127.0.0.1:1/v1'], tokenIds: true, logprobs: true },
    },
  });
  const control = new GatewayControlClient(t.gateway.url, ADMIN_KEY);
  await control.registerPolicy('policy-v2', { backend: 'candidate', model: 'candidate-model' });
  await control.registerPolicy('dead-v2', { backend: 'dead', model: MODEL });
  return control;
}

/** What the harness saw: its answer's text (or tool call), and the whole of every response or streamed chunk. */
async function ask(
  client: OpenAI,
  content: string,
  options: { stream?: boolean; tools?: boolean; model?: string } = {},
): Promise<{ text: string; raw: string }> {
  const request = {
    model: options.model ?? 'production',
    messages: [{ role: 'user' as const, content }],
    ...(options.tools && { tools }),
  };
  if (!options.stream) {
    const response = await client.chat.completions.create(request);
    const message = response.choices[0]?.message;
    return { text: message?.content ?? JSON.stringify(message?.tool_calls), raw: JSON.stringify(response) };
  }
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) chunks.push(chunk);
  const delta = (pick: (d: OpenAI.ChatCompletionChunk.Choice.Delta) => string | undefined | null) =>
    chunks.map((c) => (c.choices[0] ? (pick(c.choices[0].delta) ?? '') : '')).join('');
  return {
    text: delta((d) => d.content) + delta((d) => d.tool_calls?.[0]?.function?.arguments),
    raw: JSON.stringify(chunks),
  };
}

let t: TestGateway;
let candidate: CandidateServer;
let control: GatewayControlClient;
beforeAll(async () => {
  t = await startTestGateway();
  candidate = await startCandidate();
  control = await withCandidates(t, candidate);
});
afterAll(async () => {
  await t.close();
  await candidate.close();
});

/** A state a test waits for: polled, with a deadline only a hang (on however loaded a machine) reaches. */
const patiently = { timeout: 30_000, interval: 20 };

/** The rollout's shadow calls once `count` of them are journaled (they finish after the harness's calls). */
async function shadowsOf(rolloutId: string, count: number, gateway: TestGateway = t): Promise<ShadowCallRecord[]> {
  return vi.waitFor(async () => {
    const shadows = await gateway.store.listShadowCalls({ rolloutId });
    expect(shadows).toHaveLength(count);
    return shadows;
  }, patiently);
}

/** `promise`, or a failure naming what hung if it has not settled by a deadline no working code comes near. */
async function settles<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what} did not finish within ${patiently.timeout} ms`)),
      patiently.timeout,
    );
  });
  try {
    return await Promise.race([promise, hung]);
  } finally {
    clearTimeout(timer);
  }
}

describe('mirror control API', () => {
  it('sets, lists and clears a mirror, and refuses bad input naming the fix', async () => {
    const unknownAlias = await t.admin('PUT', '/api/mirrors/staging', { candidate: 'policy-v2' });
    expect(unknownAlias).toMatchObject({
      status: 404,
      body: { error: { code: 'alias_not_found', message: expect.stringContaining('PUT /api/aliases/staging') } },
    });
    const unknownPolicy = await t.admin('PUT', '/api/mirrors/production', { candidate: 'policy-v9' });
    expect(unknownPolicy).toMatchObject({
      status: 404,
      body: { error: { code: 'policy_not_found', message: expect.stringContaining('PUT /api/policies/policy-v9') } },
    });
    expect(await t.admin('PUT', '/api/mirrors/production', {})).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('candidate') } },
    });
    expect(
      (await t.admin('PUT', '/api/mirrors/production', { candidate: 'policy-v2' }, 'not-the-admin-key')).status,
    ).toBe(403);
    expect(await t.admin('DELETE', '/api/mirrors/production')).toMatchObject({
      status: 404,
      body: { error: { message: expect.stringContaining('GET /api/mirrors') } },
    });
    expect((await t.admin('GET', '/api/shadow-calls?limit=0')).status).toBe(400);
    expect(await t.admin('GET', '/api/shadow-calls?after=shadow-nope')).toMatchObject({
      status: 400,
      body: { error: { message: expect.stringContaining('shadow-nope') } },
    });

    expect(await control.setMirror('production', 'policy-v2')).toEqual({
      alias: 'production',
      incumbent: 'policy-v1',
      candidate: 'policy-v2',
      sampleRate: 1,
    });
    expect(await control.listMirrors()).toEqual([
      { alias: 'production', incumbent: 'policy-v1', candidate: 'policy-v2', sampleRate: 1 },
    ]);
    expect(await control.clearMirror('production')).toMatchObject({ candidate: 'policy-v2' });
    expect(await control.listMirrors()).toEqual([]);
    await expect(control.clearMirror('production')).rejects.toMatchObject({ status: 404 });
    // A share of the rollouts, each one whole; a share outside (0, 1] is refused.
    expect(await control.setMirror('production', 'policy-v2', 0.1)).toMatchObject({ sampleRate: 0.1 });
    await expect(control.setMirror('production', 'policy-v2', 0)).rejects.toMatchObject({ status: 400 });
    await control.clearMirror('production');
  });
});

describe('mirror mode', () => {
  it("journals the candidate's answers as shadow calls and never lets them reach the harness", async () => {
    await control.setMirror('production', 'policy-v2');
    const { id, client } = await t.rollout();
    const seen = [
      await ask(client, 'hello there, my key is sk-abcdefghijklmnopqrstuvwx'),
      await ask(client, 'a streamed hello', { stream: true }),
      await ask(client, '6*7', { tools: true }),
      await ask(client, 'look it up', { tools: true, stream: true }),
    ];
    expect(seen.map((s) => s.text)).toEqual([
      'Echo: hello there, my key is sk-abcdefghijklmnopqrstuvwx',
      'Echo: a streamed hello',
      JSON.stringify([
        {
          id: 'call_0',
          type: 'function',
          function: { name: 'calculator', arguments: JSON.stringify({ expression: '6*7' }) },
        },
      ]),
      JSON.stringify({ expression: 'look it up' }),
    ]);
    for (const { raw } of seen) expect(raw).not.toContain(MARKER);

    const calls = await t.store.listCalls(id);
    expect(calls.map((c) => [c.policyVersion, c.status])).toEqual(Array(4).fill(['policy-v1', 'ok']));
    const shadows = await shadowsOf(id, 4);
    expect(calls.every((c) => !shadows.some((s) => s.id === c.id))).toBe(true);
    const byPrimary = new Map(shadows.map((s) => [s.primaryCallId, s]));
    expect(calls.map((c) => byPrimary.has(c.id))).toEqual([true, true, true, true]);
    for (const shadow of shadows) {
      expect(shadow).toMatchObject({
        rolloutId: id,
        attempt: 1,
        status: 'ok',
        candidateVersion: 'policy-v2',
        incumbentVersion: 'policy-v1',
        endpoint: 'chat.completions',
        backendUrl: candidate.url,
        upstreamStatus: 200,
        requestSent: { model: 'candidate-model', stream: false, return_token_ids: true, logprobs: true },
      });
      expect(shadow.requestSent).not.toHaveProperty('stream_options');
      expect(JSON.stringify(shadow.response)).toContain(MARKER);
      if (shadow.primaryCallId !== calls[0]!.id) expect(shadow.choices[0]?.completionIds?.length).toBeGreaterThan(5);
      // What the gateway added to get token ids is journaled apart, as for a primary call.
      expect(shadow.response).toMatchObject({ choices: [{ logprobs: null }] });
      expect(shadow.response).not.toHaveProperty('prompt_token_ids');
    }
    // Redacted like a primary call: the request sent and the candidate's echo of it.
    const first = byPrimary.get(calls[0]!.id);
    expect(JSON.stringify(first?.requestSent)).toContain('[REDACTED:openai-key]');
    expect(JSON.stringify(first?.response)).toContain(`${MARKER} hello there, my key is [REDACTED:openai-key]`);
    expect(JSON.stringify([calls, shadows])).not.toContain('sk-abcdefghijklmnopqrstuvwx');
    // Nor do its token ids spell the key (the candidate's echo had it): they are withheld, as for a primary call.
    expect(first?.choices).toEqual([{ completionIds: null, logprobs: null, finishReason: 'stop' }]);
    expect(byPrimary.get(calls[3]!.id)?.response).toMatchObject({
      choices: [{ message: { tool_calls: [{ function: { name: 'search' } }] } }],
    });
    expect(candidate.requests.every((r) => r.stream === false && !('stream_options' in r))).toBe(true);

    // The control API pages through them.
    const page1 = await control.listShadowCalls({ rolloutId: id, limit: 3 });
    const page2 = await control.listShadowCalls({ rolloutId: id, limit: 3, after: page1.next ?? undefined });
    expect([...page1.items, ...page2.items].map((s) => s.id)).toEqual(shadows.map((s) => s.id));
    expect(page2.next).toBeNull();
    expect((await control.listShadowCalls({ candidate: 'policy-v2' })).items.length).toBeGreaterThanOrEqual(4);
  });

  it('answers the harness without waiting for the candidate', async () => {
    await control.setMirror('production', 'policy-v2');
    const { id, client } = await t.rollout();
    // The candidate holds its answer until the test releases it, so the harness's answer can only come first.
    expect(
      (await settles(ask(client, 'hold please'), "the harness's call, while the candidate held its answer")).text,
    ).toBe('Echo: hold please');
    await vi.waitFor(() => expect(candidate.held).toHaveLength(1), patiently);
    expect(await t.store.listShadowCalls({ rolloutId: id })).toEqual([]);
    const releasedAt = candidate.release();
    const [shadow] = await shadowsOf(id, 1);
    expect(shadow).toMatchObject({ status: 'ok', latencyMs: expect.any(Number) });
    // Its latency is the candidate's: at least from the request's arrival to the release.
    expect(shadow?.latencyMs).toBeGreaterThanOrEqual(releasedAt - (candidate.held[0] as number));
  });

  it('mirrors neither a pinned rollout nor a call naming a version', async () => {
    await control.setMirror('production', 'policy-v2');
    const pinned = await t.rollout({ policyVersion: 'policy-v1' });
    expect((await ask(pinned.client, 'pinned rollout call')).text).toContain('Echo: pinned rollout call');
    const unpinned = await t.rollout();
    expect((await ask(unpinned.client, 'by version call', { model: 'policy-v1' })).text).toContain(
      'Echo: by version call',
    );
    // A mirrored call after them: once its shadow is journaled, theirs would have been sent.
    await ask(unpinned.client, 'barrier call');
    await shadowsOf(unpinned.id, 1);
    expect(await t.store.listShadowCalls({ rolloutId: pinned.id })).toEqual([]);
    const said = candidate.requests.map((r) => JSON.stringify(r.messages));
    expect(said.some((m) => m.includes('barrier call'))).toBe(true);
    expect(said.some((m) => m.includes('pinned rollout call') || m.includes('by version call'))).toBe(false);
  });

  it('leaves production intact when the candidate is down, and reports it as an execution failure', async () => {
    await control.setMirror('production', 'dead-v2');
    const { id, client } = await t.rollout();
    expect((await ask(client, 'still served')).text).toContain('Echo: still served');
    expect((await ask(client, 'still streamed', { stream: true })).text).toBe('Echo: still streamed');
    expect((await t.store.listCalls(id)).map((c) => c.status)).toEqual(['ok', 'ok']);
    const shadows = await shadowsOf(id, 2);
    expect(shadows.map((s) => [s.status, s.errorClass, s.response])).toEqual(
      Array(2).fill(['error', 'upstream_unreachable', null]),
    );

    const report = await shadowReport(t.store, { candidate: 'dead-v2' });
    expect(report).toMatchObject({
      mirrored: 2,
      completed: 0,
      compared: 0,
      executionFailures: { total: 2, byClass: { upstream_unreachable: 2 } },
    });
    expect(formatShadowReport(report)).toContain('upstream_unreachable 2');
    await control.clearMirror('production');
  });

  it("compares the candidate's actions with the incumbent's, split by the rollouts' rewards", async () => {
    await control.setMirror('production', 'policy-v2');
    const rewarded = await t.rollout();
    await ask(rewarded.client, 'agree with me');
    await ask(rewarded.client, '6*7', { tools: true, stream: true });
    await ask(rewarded.client, 'look it up', { tools: true });
    await control.appendEvent(rewarded.id, { type: 'reward', value: 1 });
    await control.setStatus(rewarded.id, { status: 'succeeded' });

    const failed = await t.rollout();
    await ask(failed.client, 'hello', { stream: true });
    await ask(failed.client, 'just answer', { tools: true });
    await ask(failed.client, 'crash now');
    await control.appendEvent(failed.id, { type: 'reward', value: 0 });
    await control.setStatus(failed.id, { status: 'failed', failureClass: 'model' });
    await shadowsOf(rewarded.id, 3);
    await shadowsOf(failed.id, 3);

    const report = await shadowReport(t.store, { candidate: 'policy-v2', rolloutIds: [rewarded.id, failed.id] });
    expect(report).toMatchObject({
      incumbents: ['policy-v1'],
      rollouts: 2,
      mirrored: 6,
      executionFailures: { total: 1, byClass: { upstream_http_error: 1 } },
      completed: 5,
      compared: 5,
      actions: { same: 1, different_tool: 1, different_arguments: 1, different_answer: 1, tool_vs_answer: 1 },
      byOutcome: {
        rewarded: { rollouts: 1, compared: 3, disagreed: 2, kinds: { different_tool: 1, different_arguments: 1 } },
        unrewarded: { rollouts: 1, compared: 2, disagreed: 2, kinds: { different_answer: 1, tool_vs_answer: 1 } },
        unscored: { rollouts: 0, compared: 0 },
      },
    });
    expect(report.examples.different_arguments).toEqual([
      expect.objectContaining({
        rolloutId: rewarded.id,
        outcome: 'rewarded',
        incumbent: 'calculator({"expression":"6*7"})',
        candidate: `calculator({"expression":"42 ${MARKER}"})`,
      }),
    ]);
    const text = formatShadowReport(report);
    expect(text).toContain('6 mirrored calls over 2 rollouts');
    expect(text).toMatch(/rewarded \(reward > 0\)\s+1\s+3\s+2\s+66\.7%/);
    // Shadow calls never enter what training reads.
    expect(JSON.stringify(await t.store.listCalls(failed.id))).not.toContain(MARKER);
    await control.clearMirror('production');
  });
});

describe('mirror mode at the edges', () => {
  it('journals a candidate that does not answer in time as a timeout', async () => {
    // The candidate never answers, so its wait always runs out; the production backend answers
    // at once, well inside the same (roomy, for a loaded machine) limit.
    const impatient = await startTestGateway({ gateway: { headersTimeoutMs: 3000 } });
    const silent = await startCandidate();
    try {
      const ctl = await withCandidates(impatient, silent);
      await ctl.setMirror('production', 'policy-v2');
      const { id, client } = await impatient.rollout();
      expect((await ask(client, 'hang up on me')).text).toBe('Echo: hang up on me');
      const [shadow] = await shadowsOf(id, 1, impatient);
      expect(shadow).toMatchObject({ status: 'error', errorClass: 'upstream_timeout', response: null });
      expect(silent.requests).toHaveLength(1);
    } finally {
      await impatient.close();
      await silent.close();
    }
  });

  it('skips shadows past the in-flight cap, and aborts those in flight when the gateway closes, journaling both', async () => {
    const closing = await startTestGateway({ gateway: { maxShadowsInFlight: 1 } });
    const hanging = await startCandidate();
    let closed = false;
    try {
      const ctl = await withCandidates(closing, hanging);
      await ctl.setMirror('production', 'policy-v2');
      const recorded = vi.spyOn(closing.store, 'recordShadowCall');
      const { client } = await closing.rollout();
      expect((await ask(client, 'hang on')).text).toContain('Echo: hang on');
      await vi.waitFor(() => expect(hanging.requests).toHaveLength(1), patiently);
      // The candidate is busy with the first: the second call is served, its shadow is not sent.
      expect((await ask(client, 'while it hangs')).text).toBe('Echo: while it hangs');
      await vi.waitFor(
        () =>
          expect(recorded).toHaveBeenCalledWith(
            expect.objectContaining({ status: 'error', errorClass: 'shadow_overloaded' }),
          ),
        patiently,
      );
      expect(hanging.requests).toHaveLength(1);

      // The candidate never answers: closing finishes only because it aborts the shadow in flight.
      await settles(closing.close(), 'closing the gateway with a shadow call in flight');
      closed = true;
      expect(hanging.aborted).toBe(1);
      expect(recorded).toHaveBeenCalledTimes(2);
      expect(recorded).toHaveBeenCalledWith(expect.objectContaining({ status: 'error', errorClass: 'gateway_closed' }));
    } finally {
      if (!closed) await closing.close();
      await hanging.close();
    }
  });
});
