import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from './sqlite-driver.js';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { SqliteTraceStore } from './sqlite-store.js';
import { JOURNAL_MIGRATIONS } from './journal-schema.js';
import { PostgresTraceStore } from './postgres-store.js';
import type { SqlTraceStore } from './journal-store.js';
import { sql } from 'kysely';
import { freshPostgresUrl, storeBackends, type StoreBackend } from '../../test/helpers/postgres.js';
import type { Rollout } from '../rollouts/rollout.js';
import { ROLLOUT_ID_MAX_LENGTH } from '../rollouts/rollout-id.js';
import {
  StoreConflictError,
  type CallFinish,
  type CallStart,
  type RolloutFilter,
  type ShadowCallRecord,
  type TraceStore,
} from './trace-store.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The journal named `name` on a backend: opened again by name, as a restarted process (or another one) would. */
const databases = new Map<string, Promise<string>>();
async function openOn(backend: StoreBackend, name: string): Promise<TraceStore> {
  if (backend === 'sqlite') return new SqliteTraceStore(path.join(dir, `${name}.sqlite`));
  if (!databases.has(name)) databases.set(name, freshPostgresUrl());
  return PostgresTraceStore.open(await (databases.get(name) as Promise<string>));
}

/** What a store keeps of its shadow calls' requests, in bytes. */
async function storedShadowRequestBytes(store: TraceStore): Promise<number> {
  const query = sql<{ bytes: number }>`SELECT SUM(LENGTH(request_sent)) AS bytes FROM shadow_calls`;
  return Number((await query.execute((store as SqlTraceStore)['database'].db)).rows[0]?.bytes);
}

function finish(promptIds: number[], completionIds: number[]): CallFinish {
  return {
    response: { choices: [{ message: { role: 'assistant', content: 'x' } }] },
    promptIds,
    choices: [{ completionIds, logprobs: completionIds.map((id) => -id / 1000), finishReason: 'stop' }],
    usage: { prompt_tokens: promptIds.length, completion_tokens: completionIds.length },
    upstreamStatus: 200,
    errorClass: null,
    errorMessage: null,
    ttftMs: 1,
    latencyMs: 2,
  };
}

/** The request a harness sends on turn t of a conversation that grows by two messages a turn. */
function requestAt(t: number) {
  const messages = [{ role: 'system', content: 'You use tools.' }];
  for (let i = 0; i <= t; i++) {
    messages.push({ role: 'user', content: `tool output ${i}: ${'data '.repeat(20)}` });
    if (i < t) messages.push({ role: 'assistant', content: `step ${i}` });
  }
  return { model: 'production', temperature: 1, messages };
}

async function journal(
  store: TraceStore,
  rolloutId: string,
  turns: Array<{ prompt: number[]; completion: number[] }>,
  firstTurn = 0,
) {
  for (const [i, turn] of turns.entries()) {
    const id = randomUUID();
    const received = requestAt(firstTurn + i);
    await store.beginCall({
      id,
      rolloutId,
      attempt: 1,
      endpoint: 'chat.completions',
      policyVersion: 'v1',
      backendUrl: 'http://backend',
      stream: false,
      requestReceived: received,
      requestSent: { ...received, model: 'Qwen/Qwen3-0.6B', return_token_ids: true },
      startedAt: Date.now(),
    });
    await store.finishCall(id, finish(turn.prompt, turn.completion));
  }
}

/** A multi-turn conversation: each prompt is the previous prompt + completion + inserted tool output. */
function conversation(turns: number, seed = 1): Array<{ prompt: number[]; completion: number[] }> {
  let next = seed;
  const token = () => (next = (next * 1103515245 + 12345) % 150_000);
  const out: Array<{ prompt: number[]; completion: number[] }> = [];
  let context = Array.from({ length: 200 }, token);
  for (let t = 0; t < turns; t++) {
    const completion = Array.from({ length: 40 }, token);
    out.push({ prompt: context, completion });
    context = [...context, ...completion, ...Array.from({ length: 30 }, token)];
  }
  return out;
}

describe.each(storeBackends)('trace store contract (%s)', (backend) => {
  const openStore = (name: string = randomUUID()) => openOn(backend, name);

  describe('calls', () => {
    it('round-trips a 100-turn rollout exactly while storing each prompt as a delta', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'long' });
      const turns = conversation(100);
      await journal(store, 'long', turns);

      const calls = await store.listCalls('long');
      expect(calls.map((c) => c.seq)).toEqual(turns.map((_, i) => i + 1));
      calls.forEach((call, i) => {
        expect(call.promptIds).toEqual(turns[i]?.prompt);
        expect(call.choices?.[0]?.completionIds).toEqual(turns[i]?.completion);
        expect(call.choices?.[0]?.logprobs?.[0]).toBeCloseTo(-(turns[i]?.completion[0] ?? 0) / 1000, 5);
      });
      calls.forEach((call, t) => {
        expect(call.requestReceived).toEqual(requestAt(t));
        expect(call.requestSent).toEqual({ ...requestAt(t), model: 'Qwen/Qwen3-0.6B', return_token_ids: true });
      });
      expect(await store.getCall(calls[99]!.id)).toEqual(calls[99]);

      // Stored whole, prompts and requests would grow with the square of the rollout's length.
      const wholeBytes = turns.reduce(
        (sum, t, i) => sum + t.prompt.length * 4 + 2 * JSON.stringify(requestAt(i)).length,
        0,
      );
      const { bytes } = await store.rolloutFootprint('long');
      expect(bytes).toBeLessThan(wholeBytes / 20);
      await store.close();
    });

    it('keeps encoding deltas after a restart, from the journal alone', async () => {
      const name = randomUUID();
      const turns = conversation(6, 7);
      let store = await openStore(name);
      await store.createRollout({ id: 'r' });
      await journal(store, 'r', turns.slice(0, 3));
      await store.close();

      store = await openStore(name);
      await journal(store, 'r', turns.slice(3), 3);
      const calls = await store.listCalls('r');
      expect(calls.map((c) => c.promptIds)).toEqual(turns.map((t) => t.prompt));
      expect(calls.map((c) => c.requestReceived)).toEqual(turns.map((_, t) => requestAt(t)));
      // Decoding one call alone follows its references back across the restart.
      const afterRestart = await store.getCall(calls[3]!.id);
      expect(afterRestart?.promptIds).toEqual(turns[3]?.prompt);
      const small = await store.rolloutFootprint('r');
      expect(small.bytes).toBeLessThan(
        turns.reduce((sum, t, i) => sum + t.prompt.length * 4 + 2 * JSON.stringify(requestAt(i)).length, 0) / 2,
      );
      await store.close();
    });

    it('round-trips any sequence of prompts, whether or not they extend the previous call', async () => {
      const store = await openStore();
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              keep: fc.nat({ max: 400 }),
              added: fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 50 }),
              completion: fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 30 }),
            }),
            { minLength: 1, maxLength: 12 },
          ),
          async (steps) => {
            const rolloutId = randomUUID();
            await store.createRollout({ id: rolloutId });
            let previous: number[] = [];
            const turns = steps.map((step) => {
              // Keep some prefix of the previous sequence (possibly all of it, possibly none) and add tokens.
              const prompt = [...previous.slice(0, step.keep), ...step.added];
              previous = [...prompt, ...step.completion];
              return { prompt, completion: step.completion };
            });
            await journal(store, rolloutId, turns);
            const calls = await store.listCalls(rolloutId);
            expect(calls.map((c) => c.promptIds)).toEqual(turns.map((t) => t.prompt));
            expect(calls.map((c) => c.requestReceived)).toEqual(turns.map((_, t) => requestAt(t)));
            expect(calls.map((c) => c.choices?.[0]?.completionIds)).toEqual(turns.map((t) => t.completion));
          },
        ),
        { numRuns: 60 },
      );
      await store.close();
    });

    it('keeps an in-flight call as such until it finishes', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'r' });
      const { seq } = await store.beginCall({
        id: 'c1',
        rolloutId: 'r',
        attempt: 1,
        endpoint: 'completions',
        policyVersion: 'v1',
        backendUrl: 'http://b',
        stream: true,
        requestReceived: { prompt: 'hi' },
        requestSent: { prompt: 'hi', return_token_ids: true },
        startedAt: 1,
      });
      expect(seq).toBe(1);
      expect(await store.getCall('c1')).toMatchObject({ status: 'in_flight', requestSent: { return_token_ids: true } });
      await store.finishCall('c1', {
        ...finish([], []),
        promptIds: null,
        choices: [],
        errorClass: 'upstream_stream_cut',
        errorMessage: 'cut',
      });
      expect(await store.getCall('c1')).toMatchObject({
        status: 'error',
        errorClass: 'upstream_stream_cut',
        promptIds: null,
      });
      await store.close();
    });
  });

  describe('group commit', () => {
    const start = (id: string, rolloutId: string, content: string) => ({
      id,
      rolloutId,
      attempt: 1,
      endpoint: 'chat.completions' as const,
      policyVersion: 'v1',
      backendUrl: 'http://b',
      stream: false,
      requestReceived: {
        messages: [
          { role: 'system', content: 'shared' },
          { role: 'user', content },
        ],
      },
      requestSent: {
        messages: [
          { role: 'system', content: 'shared' },
          { role: 'user', content },
        ],
      },
      startedAt: 1,
    });

    it('commits writes requested together in one go, each durable when its promise resolves', async () => {
      const name = randomUUID();
      const store = await openStore(name);
      await store.createRollout({ id: 'r' });
      const seqs = await Promise.all(
        Array.from({ length: 20 }, (_, i) => store.beginCall(start(`c${i}`, 'r', `turn ${i}`))),
      );
      expect(seqs.map((s) => s.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      await Promise.all(Array.from({ length: 20 }, (_, i) => store.finishCall(`c${i}`, finish([1, 2, 3, i], [9]))));
      // Another connection (another process, after a crash) sees every write whose promise resolved.
      const reader = await openStore(name);
      const calls = await reader.listCalls('r');
      expect(calls).toHaveLength(20);
      expect(calls.every((c) => c.status === 'ok')).toBe(true);
      expect(calls.map((c) => c.promptIds)).toEqual(Array.from({ length: 20 }, (_, i) => [1, 2, 3, i]));
      expect(
        calls.map((c) => (c.requestReceived as { messages: Array<{ content: string }> }).messages[1]?.content),
      ).toEqual(Array.from({ length: 20 }, (_, i) => `turn ${i}`));
      await reader.close();
      await store.close();
    });

    it('fails only the bad write of a batch, and the good ones still commit', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'r' });
      const results = await Promise.allSettled([
        store.beginCall(start('ok-1', 'r', 'one')),
        store.beginCall(start('orphan', 'no-such-rollout', 'two')),
        store.finishCall('never-begun', finish([1], [2])),
        store.beginCall(start('ok-2', 'r', 'three')),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
      expect((await store.listCalls('r')).map((c) => c.id)).toEqual(['ok-1', 'ok-2']);
      // The caches the failed batch touched were rebuilt from the journal: later calls still decode.
      await store.finishCall('ok-2', finish([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [11]));
      await store.beginCall(start('ok-3', 'r', 'four'));
      await store.finishCall('ok-3', finish([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [13]));
      const calls = await store.listCalls('r');
      expect(calls.map((c) => c.promptIds)).toEqual([
        undefined,
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
      ]);
      expect(calls[2]?.promptExtends).toMatchObject({ ref: 'ok-2' });
      await store.close();
    });

    it('commits what was requested before close', async () => {
      const name = randomUUID();
      const store = await openStore(name);
      await store.createRollout({ id: 'r' });
      const begun = store.beginCall(start('c1', 'r', 'last words'));
      await store.close();
      await expect(begun).resolves.toEqual({ seq: 1 });
      const reader = await openStore(name);
      expect(await reader.getCall('c1')).toMatchObject({ status: 'in_flight' });
      await reader.close();
    });
  });

  describe('shadow calls', () => {
    /** The candidate's copy of a journaled call: its request as sent to the candidate, and its answer. */
    function shadowOf(
      primaryId: string,
      t: number,
      candidate: string,
      overrides: Partial<ShadowCallRecord> = {},
    ): ShadowCallRecord {
      return {
        id: `shadow-${candidate}-${t}`,
        primaryCallId: primaryId,
        rolloutId: 'r',
        attempt: 1,
        candidateVersion: candidate,
        incumbentVersion: 'v1',
        endpoint: 'chat.completions',
        backendUrl: 'http://candidate/v1',
        requestSent: { ...requestAt(t), model: candidate, stream: false, return_token_ids: true },
        response: { choices: [{ index: 0, message: { role: 'assistant', content: `candidate step ${t}` } }] },
        choices: [{ completionIds: [t, t + 1], logprobs: [-0.5, -0.25], finishReason: 'stop' }],
        status: 'ok',
        errorClass: null,
        errorMessage: null,
        upstreamStatus: 200,
        latencyMs: 3,
        startedAt: 1000 + t,
        ...overrides,
      };
    }

    it('keeps shadow calls apart from calls, storing their conversation as a reference into the journal', async () => {
      const name = randomUUID();
      let store = await openStore(name);
      await store.createRollout({ id: 'r' });
      const turns = 30;
      await journal(store, 'r', conversation(turns));
      const primaries = await store.listCalls('r');
      for (const [t, call] of primaries.entries()) {
        await store.recordShadowCall(shadowOf(call.id, t, 'v2'));
        if (t % 10 === 0) {
          await store.recordShadowCall(
            shadowOf(call.id, t, 'v3', {
              response: null,
              choices: [],
              status: 'error',
              errorClass: 'upstream_unreachable',
              errorMessage: 'refused',
              upstreamStatus: null,
            }),
          );
        }
      }
      expect(await store.listCalls('r')).toEqual(primaries);

      // After a restart, decoded from the journal alone.
      await store.close();
      store = await openStore(name);
      const shadows = await store.listShadowCalls({ candidate: 'v2' });
      expect(shadows).toHaveLength(turns);
      shadows.forEach((shadow, t) => expect(shadow).toEqual(shadowOf(primaries[t]!.id, t, 'v2')));
      expect(await store.listShadowCalls({ candidate: 'v3' })).toEqual(
        [0, 10, 20].map((t) =>
          shadowOf(primaries[t]!.id, t, 'v3', {
            response: null,
            choices: [],
            status: 'error',
            errorClass: 'upstream_unreachable',
            errorMessage: 'refused',
            upstreamStatus: null,
          }),
        ),
      );
      expect(await store.listShadowCalls({ rolloutId: 'r' })).toHaveLength(turns + 3);
      expect(await store.listShadowCalls({ rolloutId: 'other' })).toEqual([]);

      // Stored whole, the shadows' requests would grow with the square of the rollout's length.
      const stored = await storedShadowRequestBytes(store);
      const whole = shadows.reduce((sum, s) => sum + JSON.stringify(s.requestSent).length, 0);
      expect(stored).toBeLessThan(whole / 5);
      await store.close();
    });

    it('pages through shadow calls after the last one seen', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'r' });
      await journal(store, 'r', conversation(5));
      const primaries = await store.listCalls('r');
      for (const [t, call] of primaries.entries()) await store.recordShadowCall(shadowOf(call.id, t, 'v2'));
      const first = await store.listShadowCalls({ candidate: 'v2', limit: 2 });
      const second = await store.listShadowCalls({ candidate: 'v2', limit: 2, after: first.at(-1)!.id });
      const third = await store.listShadowCalls({ candidate: 'v2', limit: 2, after: second.at(-1)!.id });
      expect([...first, ...second, ...third].map((s) => s.id)).toEqual([0, 1, 2, 3, 4].map((t) => `shadow-v2-${t}`));
      await expect(store.listShadowCalls({ after: 'shadow-unknown' })).rejects.toThrow(
        /no shadow call "shadow-unknown" to continue after/,
      );
      await store.close();
    });
  });

  describe('rollouts and events', () => {
    it('creates rollouts idempotently by id, and refuses the same id for another rollout instead of answering with the old one', async () => {
      const store = await openStore();
      const first = await store.createRollout({
        id: 'a',
        taskId: 't1',
        policyVersion: 'v1',
        metadata: { k: 1, j: [2] },
      });
      const again = await store.createRollout({
        id: 'a',
        taskId: 't1',
        policyVersion: 'v1',
        metadata: { j: [2], k: 1 },
      });
      expect(first.created).toBe(true);
      expect(again).toEqual({ rollout: first.rollout, created: false });
      expect(first.rollout).toMatchObject({
        status: 'queued',
        attempts: 1,
        mode: 'train',
        taskId: 't1',
        metadata: { k: 1, j: [2] },
      });
      await expect(
        store.createRollout({ id: 'a', taskId: 't1', policyVersion: 'v2', metadata: { k: 1, j: [2] } }),
      ).rejects.toThrow(
        /rollout a exists with another policyVersion \("v1", not "v2"\); send the same body to retry, or use a new id/,
      );
      await expect(
        store.createRollout({ id: 'a', taskId: 'other', mode: 'eval', policyVersion: 'v1' }),
      ).rejects.toBeInstanceOf(StoreConflictError);
      await expect(
        store.createRollout({ id: 'a', taskId: 'other', mode: 'eval', policyVersion: 'v1' }),
      ).rejects.toThrow(/another taskId \("t1", not "other"\), mode \("train", not "eval"\);/);
      // Metadata describes it; the first write keeps it (a newer runner may describe rollouts differently).
      expect(await store.createRollout({ id: 'a', taskId: 't1', policyVersion: 'v1', metadata: { k: 2 } })).toEqual({
        rollout: first.rollout,
        created: false,
      });
      await store.close();
    });

    it('ends the calls a previous gateway left in flight as gateway_lost, and only those', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'r' });
      const begin = (id: string, startedAt: number) =>
        store.beginCall({
          id,
          rolloutId: 'r',
          attempt: 1,
          endpoint: 'chat.completions',
          policyVersion: 'v1',
          backendUrl: 'http://b',
          stream: false,
          requestReceived: {},
          requestSent: {},
          startedAt,
        });
      await begin('cut-off', 1000);
      await begin('answered', 1001);
      await store.finishCall('answered', {
        response: {},
        promptIds: null,
        choices: [],
        usage: null,
        upstreamStatus: 200,
        errorClass: null,
        errorMessage: null,
        ttftMs: 1,
        latencyMs: 2,
      });
      await begin('new', 5000);
      expect(await store.markLostCalls(2000, 'the gateway stopped')).toBe(1);
      expect(await store.getCall('cut-off')).toMatchObject({
        status: 'error',
        errorClass: 'gateway_lost',
        errorMessage: 'the gateway stopped',
        latencyMs: 1000,
      });
      expect(await store.getCall('answered')).toMatchObject({ status: 'ok' });
      expect(await store.getCall('new')).toMatchObject({ status: 'in_flight' });
      await store.close();
    });

    it('reopens a rollout lost to a fault in a new attempt, and never a scored or unfinished one', async () => {
      const store = await openStore();
      for (const id of ['lost', 'scored', 'cancelled', 'running']) {
        await store.createRollout({ id });
        await store.setRolloutStatus(id, { status: 'running' }, 'admin');
      }
      await store.setRolloutStatus(
        'lost',
        { status: 'failed', reason: 'backend down', failureClass: 'infrastructure' },
        'admin',
      );
      await store.setRolloutStatus(
        'scored',
        { status: 'failed', reason: 'exited 1', failureClass: 'harness' },
        'admin',
      );
      await store.setRolloutStatus('cancelled', { status: 'cancelled' }, 'admin');

      const reopened = await store.reopenRollout('lost', 'replayed: it was not scored');
      expect(reopened).toMatchObject({
        status: 'queued',
        attempts: 2,
        failureClass: null,
        statusReason: 'replayed: it was not scored',
      });
      expect((await store.listEvents('lost')).at(-1)).toMatchObject({
        attempt: 2,
        payload: { from: 'failed', to: 'queued', reopened: { failureClass: 'infrastructure', reason: 'backend down' } },
      });
      expect(await store.reopenRollout('cancelled', 'again')).toMatchObject({ status: 'queued', attempts: 2 });
      await expect(store.reopenRollout('scored', 'again')).rejects.toThrow(
        /cannot be reopened: it was scored \(failed, harness\)/,
      );
      await expect(store.reopenRollout('running', 'again')).rejects.toMatchObject({ status: 409 });
      await store.close();
    });

    it('records why each superseded attempt ended, once, whoever started the next one', async () => {
      const store = await openStore();
      for (const id of ['lost-runner', 'said-why', 'lost-fault']) {
        await store.createRollout({ id });
        await store.setRolloutStatus(id, { status: 'running', attempt: 1 }, 'admin');
      }
      const failedOf = async (id: string) =>
        (await store.listEvents(id))
          .filter((e) => e.type === 'custom' && e.payload.name === 'attempt_failed')
          .map((e) => [e.attempt, e.payload.data]);
      // Nobody said why: the attempt's runner was lost.
      await store.startAttempt('lost-runner');
      expect(await failedOf('lost-runner')).toEqual([
        [
          1,
          {
            attempt: 1,
            failureClass: 'orchestrator',
            reason: 'attempt 1 ended without a result or a recorded failure (its runner was lost); attempt 2 started',
          },
        ],
      ]);
      // The runner said why: kept, not doubled.
      const said = { attempt: 1, failureClass: 'infrastructure', reason: 'the backend was unreachable' };
      await store.appendEvent('said-why', 1, { type: 'custom', name: 'attempt_failed', data: said }, 'admin');
      await store.startAttempt('said-why');
      expect(await failedOf('said-why')).toEqual([[1, said]]);
      // An attempt that ended unscored, run again: its own failure.
      await store.setRolloutStatus(
        'lost-fault',
        { status: 'failed', reason: 'model call c1 failed upstream', failureClass: 'infrastructure', attempt: 1 },
        'admin',
      );
      await store.reopenRollout('lost-fault', 'run again');
      expect(await failedOf('lost-fault')).toEqual([
        [1, { attempt: 1, failureClass: 'infrastructure', reason: 'model call c1 failed upstream' }],
      ]);
      await store.close();
    });

    it('allows only legal status transitions and records each with its reason', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'a' });
      await expect(store.setRolloutStatus('a', { status: 'succeeded' }, 'admin')).rejects.toThrow(
        /queued; it cannot become succeeded/,
      );
      await store.setRolloutStatus('a', { status: 'running', reason: 'started' }, 'admin');
      const done = await store.setRolloutStatus(
        'a',
        { status: 'failed', reason: 'harness exited 1', failureClass: 'harness' },
        'admin',
      );
      expect(done).toMatchObject({ status: 'failed', statusReason: 'harness exited 1', failureClass: 'harness' });
      await expect(store.setRolloutStatus('a', { status: 'running' }, 'admin')).rejects.toMatchObject({ status: 409 });
      await expect(store.startAttempt('a')).rejects.toThrow(/has finished/);
      const events = await store.listEvents('a');
      expect(events.map((e) => e.payload)).toEqual([
        { from: 'queued', to: 'running', reason: 'started' },
        { from: 'running', to: 'failed', reason: 'harness exited 1', failureClass: 'harness' },
      ]);
      await store.close();
    });

    it("refuses a status change from an attempt another has superseded, in the change's own transaction", async () => {
      const store = await openStore();
      await store.createRollout({ id: 'a' });
      await store.setRolloutStatus('a', { status: 'running', attempt: 1 }, 'admin');
      await store.startAttempt('a');
      await expect(
        store.setRolloutStatus('a', { status: 'succeeded', reason: 'verified', attempt: 1 }, 'admin'),
      ).rejects.toMatchObject({ status: 409, message: expect.stringContaining('superseded by attempt 2') });
      expect(await store.getRollout('a')).toMatchObject({ status: 'running', attempts: 2 });
      await store.setRolloutStatus('a', { status: 'succeeded', reason: 'verified', attempt: 2 }, 'admin');
      expect(await store.getRollout('a')).toMatchObject({ status: 'succeeded' });
      await store.close();
    });

    it('answers getRollout from memory only while nothing changed it, in this process or another', async () => {
      const name = randomUUID();
      const gateway = await openStore(name);
      const other = await openStore(name);
      await gateway.createRollout({ id: 'a', metadata: { tags: ['x'] } });
      const first = (await gateway.getRollout('a')) as Rollout;
      first.status = 'succeeded';
      (first.metadata.tags as string[]).push('mutated');
      expect(await gateway.getRollout('a')).toMatchObject({ status: 'queued', attempts: 1, metadata: { tags: ['x'] } });

      // Another connection (the control API of another process, an operator's CLI) moves it on.
      await other.setRolloutStatus('a', { status: 'running' }, 'admin');
      expect(await gateway.getRollout('a')).toMatchObject({ status: 'running', attempts: 1 });
      await other.startAttempt('a');
      expect(await gateway.getRollout('a')).toMatchObject({ status: 'running', attempts: 2 });
      await other.setRolloutStatus('a', { status: 'succeeded' }, 'admin');
      expect(await gateway.getRollout('a')).toMatchObject({ status: 'succeeded' });

      // And this connection's own changes.
      await gateway.createRollout({ id: 'b' });
      expect(await gateway.getRollout('b')).toMatchObject({ status: 'queued' });
      await gateway.setRolloutStatus('b', { status: 'running' }, 'gateway');
      expect(await gateway.getRollout('b')).toMatchObject({ status: 'running' });
      await gateway.startAttempt('b');
      expect(await gateway.getRollout('b')).toMatchObject({ attempts: 2 });
      await gateway.setRolloutStatus('b', { status: 'cancelled' }, 'admin');
      expect(await gateway.getRollout('b')).toMatchObject({ status: 'cancelled' });
      expect(await gateway.getRollout('never')).toBeUndefined();
      await other.close();
      await gateway.close();
    });

    it('records a span once however often its action is appended', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'a' });
      const span = {
        type: 'span',
        actionId: 'act-1',
        name: 'calculator',
        kind: 'tool',
        permission: 'allowed',
        input: { x: 1 },
      } as const;
      const first = await store.appendEvent('a', 1, span, 'rollout');
      const again = await store.appendEvent('a', 1, span, 'rollout');
      expect(again.id).toBe(first.id);
      await store.appendEvent('a', 1, { type: 'reward', value: 0.5, components: { success: 1, cost: -0.5 } }, 'admin');
      const events = await store.listEvents('a');
      expect(events.map((e) => [e.type, e.source])).toEqual([
        ['span', 'rollout'],
        ['reward', 'admin'],
      ]);
      expect(events[1]?.payload).toEqual({ value: 0.5, components: { success: 1, cost: -0.5 } });
      await store.close();
    });

    it('pages through rollouts newest first, with filters', async () => {
      const store = await openStore();
      for (let i = 0; i < 7; i++) await store.createRollout({ id: `r${i}`, taskId: i % 2 ? 'odd' : 'even' });
      const first = await store.listRollouts({ limit: 3 });
      expect(first.items.map((r) => r.id)).toEqual(['r6', 'r5', 'r4']);
      const second = await store.listRollouts({ limit: 3, after: first.next ?? undefined });
      expect(second.items.map((r) => r.id)).toEqual(['r3', 'r2', 'r1']);
      const third = await store.listRollouts({ limit: 3, after: second.next ?? undefined });
      expect(third).toEqual({ items: [expect.objectContaining({ id: 'r0' })], next: null });
      expect((await store.listRollouts({ taskId: 'odd' })).items.map((r) => r.id)).toEqual(['r5', 'r3', 'r1']);
      await expect(store.listRollouts({ after: 'garbage' })).rejects.toMatchObject({ status: 400 });
      await store.close();
    });
  });

  describe('what the gateway, the API, the console and the runners read back', () => {
    const started = (over: Pick<CallStart, 'id' | 'rolloutId'> & Partial<CallStart>): CallStart => ({
      attempt: 1,
      endpoint: 'chat.completions',
      policyVersion: 'v1',
      backendUrl: 'http://backend/v1',
      stream: false,
      requestReceived: { model: 'production', messages: [{ role: 'user', content: 'hi' }] },
      requestSent: { model: 'Qwen/Qwen3-0.6B', messages: [{ role: 'user', content: 'hi' }], return_token_ids: true },
      startedAt: 1_000,
      ...over,
    });
    const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

    it('keeps every field of a call: endpoint, version, stream, usage, timings, each of n choices, ids withheld, and an error', async () => {
      const store = await openStore();
      // The longest rollout id there may be, with each kind of character one may hold.
      const id = `b.${'t'.repeat(ROLLOUT_ID_MAX_LENGTH - 6)}:x.0`;
      await store.createRollout({ id });
      const chat = started({ id: 'chat', rolloutId: id, stream: true, policyVersion: 'policy-v2', startedAt: 1_000 });
      await store.beginCall(chat);
      const answered: CallFinish = {
        response: {
          object: 'chat.completion',
          choices: [0, 1, 2].map((index) => ({
            index,
            message: { role: 'assistant', content: 'Echo: é 😀' },
            finish_reason: index === 2 ? 'length' : 'stop',
          })),
        },
        promptIds: [1, 2, 3],
        choices: [
          { completionIds: [4, 5], logprobs: [-0.5, -0.25], finishReason: 'stop' },
          { completionIds: [6], logprobs: [-1], finishReason: 'stop' },
          // Withheld, as the gateway withholds the ids of a reply it redacted.
          { completionIds: null, logprobs: null, finishReason: 'length' },
        ],
        usage: { prompt_tokens: 3, completion_tokens: 3 },
        upstreamStatus: 200,
        errorClass: null,
        errorMessage: null,
        ttftMs: 12.5,
        latencyMs: 40.25,
      };
      await store.finishCall('chat', answered);
      // The completions endpoint, and a call that failed upstream with nothing but its status.
      const completion = started({
        id: 'completion',
        rolloutId: id,
        endpoint: 'completions',
        requestReceived: { model: 'v1', prompt: 'count' },
        requestSent: { model: 'v1', prompt: 'count', logprobs: 0 },
        startedAt: 2_000,
      });
      await store.beginCall(completion);
      const failed: CallFinish = {
        response: undefined,
        promptIds: null,
        choices: [],
        usage: null,
        upstreamStatus: 500,
        errorClass: 'upstream_http_error',
        errorMessage: 'backend answered 500',
        ttftMs: null,
        latencyMs: 3,
      };
      await store.finishCall('completion', failed);

      const expected = [
        { ...chat, ...answered, seq: 1, status: 'ok', promptExtends: null },
        { ...completion, ...failed, seq: 2, status: 'error', promptExtends: null },
      ];
      expect(await store.listCalls(id)).toEqual(expected);
      expect(await store.getCall('completion')).toEqual(expected[1]);
      expect(await store.rolloutFootprint(id)).toEqual({ calls: 2, bytes: expect.any(Number) });
      expect(await store.rolloutFootprint('no-such-rollout')).toEqual({ calls: 0, bytes: 0 });
      expect(await store.getCall('no-such-call')).toBeUndefined();
      expect(await store.listCalls('no-such-rollout')).toEqual([]);
      await store.close();
    });

    it('stores a responses-API conversation (`input`) as a delta too, and gives it back whole', async () => {
      const store = await openStore();
      await store.createRollout({ id: 'r' });
      const input = (t: number) =>
        Array.from({ length: 2 * t + 1 }, (_, i) => ({
          role: i % 2 ? 'assistant' : 'user',
          content: `turn ${i}: ${'words '.repeat(30)}`,
        }));
      for (let t = 0; t < 5; t++) {
        const request = { model: 'production', input: input(t) };
        await store.beginCall(
          started({
            id: `c${t}`,
            rolloutId: 'r',
            endpoint: 'responses',
            requestReceived: request,
            requestSent: { ...request, model: 'v1' },
          }),
        );
        await store.finishCall(`c${t}`, {
          ...finish([], []),
          promptIds: null,
          choices: [],
          response: { id: `resp-${t}`, output: [] },
        });
      }
      const calls = await store.listCalls('r');
      expect(calls.map((c) => c.requestReceived)).toEqual(
        [0, 1, 2, 3, 4].map((t) => ({ model: 'production', input: input(t) })),
      );
      expect(calls.map((c) => c.requestSent)).toEqual([0, 1, 2, 3, 4].map((t) => ({ model: 'v1', input: input(t) })));
      expect(calls.map((c) => [c.endpoint, c.promptIds, c.response])).toEqual(
        [0, 1, 2, 3, 4].map((t) => ['responses', null, { id: `resp-${t}`, output: [] }]),
      );
      expect(await store.getCall('c4')).toEqual(calls[4]);
      const whole = [0, 1, 2, 3, 4].reduce((sum, t) => sum + 2 * JSON.stringify(input(t)).length, 0);
      expect((await store.rolloutFootprint('r')).bytes).toBeLessThan(whole / 2);
      await store.close();
    });

    it("numbers calls per attempt, lists one attempt's calls (decoded across attempts), and keeps each event's attempt", async () => {
      const store = await openStore();
      await store.createRollout({ id: 'r', policyVersion: 'v1' });
      await store.setRolloutStatus('r', { status: 'running' }, 'gateway');
      const turns = conversation(4, 3);
      // Attempt 1 journals two turns and is lost; attempt 2 starts the conversation again and goes further.
      await journal(store, 'r', turns.slice(0, 2));
      await store.appendEvent('r', 1, { type: 'custom', name: 'attempt_failed', data: { attempt: 1 } }, 'admin');
      expect(await store.startAttempt('r')).toMatchObject({ attempts: 2, status: 'running' });
      for (const [i, turn] of turns.entries()) {
        await store.beginCall(
          started({
            id: `a2-${i}`,
            rolloutId: 'r',
            attempt: 2,
            requestReceived: requestAt(i),
            requestSent: requestAt(i),
            startedAt: Date.now(),
          }),
        );
        await store.finishCall(`a2-${i}`, finish(turn.prompt, turn.completion));
      }
      await store.appendEvent('r', 2, { type: 'reward', value: 1, components: {} }, 'admin');

      const all = await store.listCalls('r');
      expect(all.map((c) => [c.attempt, c.seq])).toEqual([
        [1, 1],
        [1, 2],
        [2, 1],
        [2, 2],
        [2, 3],
        [2, 4],
      ]);
      const second = await store.listCalls('r', 2);
      expect(second.map((c) => c.id)).toEqual(['a2-0', 'a2-1', 'a2-2', 'a2-3']);
      expect(second.map((c) => c.promptIds)).toEqual(turns.map((t) => t.prompt));
      expect(second.map((c) => c.requestReceived)).toEqual(turns.map((_, t) => requestAt(t)));
      expect(await store.getCall('a2-3')).toEqual(second[3]);
      expect((await store.listCalls('r', 1)).map((c) => c.promptIds)).toEqual(turns.slice(0, 2).map((t) => t.prompt));
      expect(await store.listCalls('r', 3)).toEqual([]);
      expect((await store.listEvents('r')).map((e) => [e.attempt, e.type])).toEqual([
        [1, 'status'],
        [1, 'custom'],
        [2, 'reward'],
      ]);
      await store.close();
    });

    it('keeps what a rollout was created with (mode, pinned version, keyless), its times, and a status change with its evidence', async () => {
      const store = await openStore();
      const before = Date.now();
      const { rollout } = await store.createRollout({
        id: 'pinned',
        taskId: 't',
        mode: 'eval',
        keyless: true,
        policyVersion: 'run.v3',
        metadata: { batchId: 'b', sample: 2 },
      });
      expect(rollout).toEqual({
        id: 'pinned',
        taskId: 't',
        mode: 'eval',
        status: 'queued',
        statusReason: null,
        attempts: 1,
        keyless: true,
        policyVersion: 'run.v3',
        failureClass: null,
        metadata: { batchId: 'b', sample: 2 },
        createdAt: expect.stringMatching(ISO),
        updatedAt: rollout.createdAt,
      });
      expect(Date.parse(rollout.createdAt)).toBeGreaterThanOrEqual(before);
      expect(await store.getRollout('pinned')).toEqual(rollout);
      expect(
        await store.createRollout({ id: 'pinned', taskId: 't', mode: 'eval', keyless: true, policyVersion: 'run.v3' }),
      ).toEqual({ rollout, created: false });
      await expect(
        store.createRollout({ id: 'pinned', taskId: 't', mode: 'eval', policyVersion: 'run.v3' }),
      ).rejects.toThrow(/another keyless \(true, not false\)/);

      await store.setRolloutStatus('pinned', { status: 'running', reason: 'harness started' }, 'admin');
      const evidence = {
        exitCode: 1,
        stderrTail: 'Traceback …\nValueError: é',
        calls: ['c1'],
        nested: { ok: false, n: null },
      };
      const failed = await store.setRolloutStatus(
        'pinned',
        { status: 'failed', reason: 'harness exited 1', failureClass: 'harness', evidence },
        'admin',
      );
      expect(failed).toMatchObject({
        status: 'failed',
        statusReason: 'harness exited 1',
        failureClass: 'harness',
        createdAt: rollout.createdAt,
      });
      expect(Date.parse(failed.updatedAt)).toBeGreaterThanOrEqual(Date.parse(rollout.createdAt));
      const events = await store.listEvents('pinned');
      expect(events.at(-1)).toEqual({
        id: expect.any(Number),
        rolloutId: 'pinned',
        attempt: 1,
        type: 'status',
        source: 'admin',
        actionId: null,
        payload: { from: 'running', to: 'failed', reason: 'harness exited 1', failureClass: 'harness', evidence },
        at: expect.stringMatching(ISO),
      });
      expect(events[0]!.id).toBeLessThan(events[1]!.id);
      expect(await store.getRollout('pinned')).toEqual(failed);
      await store.close();
    });

    it('filters rollouts by status, mode and task, alone and together, page by page, newest first', async () => {
      const store = await openStore();
      for (let i = 0; i < 9; i++) {
        const id = `r${i}`;
        await store.createRollout({ id, taskId: i % 3 === 0 ? 'a' : 'b', mode: i % 2 ? 'eval' : 'train' });
        if (i >= 3) await store.setRolloutStatus(id, { status: 'running' }, 'gateway');
        if (i >= 6) await store.setRolloutStatus(id, { status: 'succeeded' }, 'admin');
      }
      const ids = async (filter: RolloutFilter) => {
        const seen: string[] = [];
        let after: string | undefined;
        for (let page = 0; page < 20; page++) {
          const { items, next } = await store.listRollouts({ ...filter, ...(after && { after }) });
          seen.push(...items.map((r) => r.id));
          if (next === null) return seen;
          after = next;
        }
        throw new Error('no last page');
      };
      expect(await ids({ mode: 'eval' })).toEqual(['r7', 'r5', 'r3', 'r1']);
      expect(await ids({ mode: 'eval', limit: 1 })).toEqual(['r7', 'r5', 'r3', 'r1']);
      expect(await ids({ status: 'running', limit: 2 })).toEqual(['r5', 'r4', 'r3']);
      expect(await ids({ status: 'queued', taskId: 'a' })).toEqual(['r0']);
      expect(await ids({ status: 'succeeded', mode: 'train', taskId: 'b', limit: 1 })).toEqual(['r8']);
      expect(await ids({ mode: 'shadow' })).toEqual([]);
      expect((await store.listRollouts({ limit: 4 })).items.map((r) => [r.id, r.status])).toEqual([
        ['r8', 'succeeded'],
        ['r7', 'succeeded'],
        ['r6', 'succeeded'],
        ['r5', 'running'],
      ]);
      await store.close();
    });

    it("lists a batch's rollouts with the reward of their current attempt, filtered by class, version and reward", async () => {
      const store = await openStore();
      const issue = async (id: string, batchId: string, extra: { policyVersion?: string } = {}) => {
        await store.createRollout({ id, taskId: 't', metadata: { batchId }, ...extra });
        await store.setRolloutStatus(id, { status: 'running' }, 'admin');
      };
      const reward = (id: string, attempt: number, value: number) =>
        store.appendEvent(id, attempt, { type: 'reward', value, components: {} }, 'admin');
      await issue('won', 'run.it1', { policyVersion: 'v1' });
      await reward('won', 1, 1);
      await store.setRolloutStatus('won', { status: 'succeeded' }, 'admin');
      await issue('lost', 'run.it1');
      await reward('lost', 1, 0);
      await store.setRolloutStatus('lost', { status: 'failed', reason: 'exit 1', failureClass: 'tool' }, 'admin');
      // The harness reports a reward too: only the verifier's counts.
      await issue('half', 'run.it1');
      await store.appendEvent('half', 1, { type: 'reward', value: 1, components: {} }, 'rollout');
      await reward('half', 1, 0.5);
      // The reward of the attempt that holds the rollout now: its second.
      await issue('retried', 'run.it2');
      await store.startAttempt('retried');
      await reward('retried', 2, 0.25);
      await issue('unscored', 'run.it1');

      const listed = async (filter: RolloutFilter) =>
        (await store.listRollouts(filter)).items.map((r) => [r.id, r.reward]);
      expect(await listed({ batchId: 'run.it1' })).toEqual([
        ['unscored', null],
        ['half', 0.5],
        ['lost', 0],
        ['won', 1],
      ]);
      expect(await listed({ batchId: 'run.it2' })).toEqual([['retried', 0.25]]);
      expect(await listed({ batchId: 'run.it1', minReward: 0.5 })).toEqual([
        ['half', 0.5],
        ['won', 1],
      ]);
      expect(await listed({ maxReward: 0.5, limit: 2 })).toEqual([
        ['retried', 0.25],
        ['half', 0.5],
      ]);
      expect(await listed({ minReward: 0, maxReward: 0 })).toEqual([['lost', 0]]);
      expect(await listed({ failureClass: 'tool' })).toEqual([['lost', 0]]);
      expect(await listed({ policyVersion: 'v1', batchId: 'run.it1' })).toEqual([['won', 1]]);
      expect(await listed({ batchId: 'run.it3' })).toEqual([]);
      await store.close();
    });

    it('lets two processes race on one rollout: one create, one finish, every attempt counted, a span once', async () => {
      const name = randomUUID();
      // Two connections, as the gateway and a runner (or two gateways) have.
      const [one, two] = [await openStore(name), await openStore(name)];
      const created = await Promise.all([
        one.createRollout({ id: 'raced', taskId: 't' }),
        two.createRollout({ id: 'raced', taskId: 't' }),
      ]);
      expect(created.map((c) => c.created).sort()).toEqual([false, true]);
      expect(created[0].rollout).toEqual(created[1].rollout);

      await one.setRolloutStatus('raced', { status: 'running' }, 'gateway');
      const attempts = await Promise.all([one.startAttempt('raced'), two.startAttempt('raced')]);
      expect(attempts.map((r) => r.attempts).sort()).toEqual([2, 3]);

      const span = {
        type: 'span',
        actionId: 'act-1',
        name: 'calculator',
        kind: 'tool',
        permission: 'allowed',
      } as const;
      const spans = await Promise.all([
        one.appendEvent('raced', 3, span, 'rollout'),
        two.appendEvent('raced', 3, span, 'rollout'),
      ]);
      expect(spans[0].id).toBe(spans[1].id);

      const ends = await Promise.allSettled([
        one.setRolloutStatus('raced', { status: 'succeeded', reason: 'verified' }, 'admin'),
        two.setRolloutStatus('raced', { status: 'cancelled', reason: 'batch cancelled' }, 'admin'),
      ]);
      expect(ends.filter((e) => e.status === 'fulfilled')).toHaveLength(1);
      expect(ends.find((e) => e.status === 'rejected')?.reason).toBeInstanceOf(StoreConflictError);
      const events = await two.listEvents('raced');
      expect(events.filter((e) => e.type === 'span')).toHaveLength(1);
      expect(events.filter((e) => e.type === 'status').map((e) => e.payload.from)).toEqual(['queued', 'running']);
      expect(await one.getRollout('raced')).toMatchObject({
        attempts: 3,
        status: (ends.find((e) => e.status === 'fulfilled') as PromiseFulfilledResult<Rollout>).value.status,
      });
      await one.close();
      await two.close();
    });

    it('journals text holding U+0000 from a harness, a caller or a backend, and finds it by that text again', async () => {
      const store = await openStore();
      // PostgreSQL's text cannot hold U+0000 (it refused the whole write): it keeps U+FFFD in its place.
      const kept = (text: string) => (backend === 'postgres' ? text.replaceAll('\u0000', '\uFFFD') : text);
      const body = { id: 'nul', taskId: 'task\u0000x', policyVersion: 'v\u00001', metadata: { note: 'a\u0000b' } };
      const { rollout } = await store.createRollout(body);
      expect(rollout).toMatchObject({
        taskId: kept(body.taskId),
        policyVersion: kept(body.policyVersion),
        metadata: { note: 'a\u0000b' },
      });
      // The same body again is a retry, not another rollout under its id.
      expect(await store.createRollout(body)).toEqual({ rollout, created: false });
      expect((await store.listRollouts({ taskId: body.taskId })).items.map((r) => r.id)).toEqual(['nul']);
      expect(await store.getRollout('no\u0000such')).toBeUndefined();
      expect(
        await store.setRolloutStatus('nul', { status: 'running', reason: 'harness said \u0000' }, 'admin'),
      ).toMatchObject({ statusReason: kept('harness said \u0000') });
      const span = {
        type: 'span',
        actionId: 'act\u0000',
        name: 'tool\u0000',
        kind: 'tool',
        permission: 'allowed',
      } as const;
      const first = await store.appendEvent('nul', 1, span, 'rollout');
      expect((await store.appendEvent('nul', 1, span, 'rollout')).id).toBe(first.id);
      expect((await store.listEvents('nul')).map((e) => [e.type, e.actionId])).toEqual([
        ['status', null],
        ['span', kept('act\u0000')],
      ]);

      // A backend's garbled stream, quoted in the error the gateway journals for the call and its shadow.
      const garbled = "the backend's stream holds a chunk the gateway cannot read: \u0000\u0001garbage";
      await store.beginCall(started({ id: 'c', rolloutId: 'nul' }));
      await store.finishCall('c', {
        response: undefined,
        promptIds: null,
        choices: [],
        usage: null,
        upstreamStatus: 200,
        errorClass: 'upstream_bad_response',
        errorMessage: garbled,
        ttftMs: 1,
        latencyMs: 2,
      });
      expect(await store.getCall('c')).toMatchObject({ status: 'error', errorMessage: kept(garbled) });
      await store.recordShadowCall({
        id: 's',
        primaryCallId: 'c',
        rolloutId: 'nul',
        attempt: 1,
        candidateVersion: 'v2',
        incumbentVersion: 'v1',
        endpoint: 'chat.completions',
        backendUrl: 'http://c/v1',
        requestSent: { model: 'v2' },
        response: null,
        choices: [],
        status: 'error',
        errorClass: 'upstream_bad_response',
        errorMessage: garbled,
        upstreamStatus: 200,
        latencyMs: 1,
        startedAt: 1,
      });
      expect(await store.listShadowCalls({ rolloutId: 'nul' })).toMatchObject([
        { id: 's', errorMessage: kept(garbled) },
      ]);
      await store.close();
    });

    it('lists shadow calls by candidate and rollout together', async () => {
      const store = await openStore();
      for (const id of ['a', 'b']) {
        await store.createRollout({ id });
        await journal(store, id, conversation(2));
      }
      const shadow = (
        id: string,
        rolloutId: string,
        candidateVersion: string,
        primaryCallId: string,
      ): ShadowCallRecord => ({
        id,
        primaryCallId,
        rolloutId,
        attempt: 1,
        candidateVersion,
        incumbentVersion: 'v1',
        endpoint: 'chat.completions',
        backendUrl: 'http://c/v1',
        requestSent: { model: candidateVersion },
        response: null,
        choices: [],
        status: 'error',
        errorClass: 'shadow_overloaded',
        errorMessage: 'not sent',
        upstreamStatus: null,
        latencyMs: 0,
        startedAt: 1,
      });
      for (const rolloutId of ['a', 'b']) {
        const [call] = await store.listCalls(rolloutId);
        for (const candidate of ['v2', 'v3'])
          await store.recordShadowCall(shadow(`${rolloutId}-${candidate}`, rolloutId, candidate, call!.id));
      }
      expect((await store.listShadowCalls({ candidate: 'v3', rolloutId: 'b' })).map((s) => s.id)).toEqual(['b-v3']);
      expect((await store.listShadowCalls({})).map((s) => s.id)).toEqual(['a-v2', 'a-v3', 'b-v2', 'b-v3']);
      await store.close();
    });
  });
});

describe('trace store on PostgreSQL: many gateways on one database', () => {
  const begin = (store: TraceStore, id: string) =>
    store.beginCall({
      id,
      rolloutId: 'shared',
      attempt: 1,
      endpoint: 'chat.completions',
      policyVersion: 'v1',
      backendUrl: 'http://b',
      stream: false,
      requestReceived: {},
      requestSent: {},
      startedAt: Date.now(),
    });

  it('numbers the calls of one rollout uniquely and in order when two gateways write them at once', async () => {
    const url = await freshPostgresUrl();
    // Two stores, two pools: two gateway processes.
    const [one, two] = await Promise.all([
      PostgresTraceStore.open(url, { gateway: 'one' }),
      PostgresTraceStore.open(url, { gateway: 'two' }),
    ]);
    try {
      await one.createRollout({ id: 'shared' });
      const begun = await Promise.all(Array.from({ length: 60 }, (_, i) => begin(i % 2 ? two : one, `c${i}`)));
      const seqs = begun.map((b) => b.seq).sort((a, b) => a - b);
      expect(seqs).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
      const calls = await two.listCalls('shared');
      expect(calls.map((c) => c.seq)).toEqual(seqs);
      // Each store kept the number the database gave it.
      expect(Object.fromEntries(calls.map((c) => [c.id, c.seq]))).toEqual(
        Object.fromEntries(begun.map((b, i) => [`c${i}`, b.seq])),
      );
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });

  it('ends as lost only the calls of the gateway that starts, not those of another one still running', async () => {
    const url = await freshPostgresUrl();
    const [one, two] = await Promise.all([
      PostgresTraceStore.open(url, { gateway: 'one' }),
      PostgresTraceStore.open(url, { gateway: 'two' }),
    ]);
    try {
      await one.createRollout({ id: 'shared' });
      await begin(one, 'left-by-one');
      await begin(two, 'live-on-two');
      // Gateway one restarts: a new store under the same name.
      const restarted = await PostgresTraceStore.open(url, { gateway: 'one' });
      expect(await restarted.markLostCalls(Date.now() + 1, 'gone')).toBe(1);
      expect(await restarted.getCall('left-by-one')).toMatchObject({ status: 'error', errorClass: 'gateway_lost' });
      expect(await restarted.getCall('live-on-two')).toMatchObject({ status: 'in_flight' });
      await restarted.close();
    } finally {
      await Promise.all([one.close(), two.close()]);
    }
  });

  it('sets up the schema once when gateways start on a new database at once, and refuses a newer one', async () => {
    const url = await freshPostgresUrl();
    const stores = await Promise.all([1, 2, 3].map(() => PostgresTraceStore.open(url)));
    await Promise.all(stores.map((s) => s.close()));
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      expect(
        (await admin.query("SELECT version FROM rein_schema_migrations WHERE store = 'traces' ORDER BY version")).rows,
      ).toEqual(JOURNAL_MIGRATIONS.map((m) => ({ version: m.version })));
      await admin.query(
        "INSERT INTO rein_schema_migrations (store, version, name) VALUES ('traces', 99, 'from the future')",
      );
    } finally {
      await admin.end();
    }
    await expect(PostgresTraceStore.open(url)).rejects.toThrow(
      `has schema version 99 of store traces; this Rein knows up to ${JOURNAL_MIGRATIONS.length}: upgrade Rein`,
    );
  });
});

describe('trace store on SQLite: journals from before schema versions', () => {
  it('opens a journal written before versions were recorded, keeps its calls, and brings it up to date', async () => {
    const file = path.join(dir, `${randomUUID()}.sqlite`);
    // The journal as the previous release left it: today's tables and no rein_schema_migrations.
    const before = new SqliteTraceStore(file);
    await before.createRollout({ id: 'old' });
    await journal(before, 'old', conversation(3));
    await before.close();
    const raw = openDatabase(file);
    raw.exec('DROP TABLE rein_schema_migrations');
    // Nor what migrations after the first added: the reward slot.
    raw.exec('DROP INDEX events_reward; ALTER TABLE events DROP COLUMN reward_attempt');
    raw.close();

    const store = new SqliteTraceStore(file);
    expect((await store.listCalls('old')).map((c) => c.promptIds)).toEqual(conversation(3).map((t) => t.prompt));
    await journal(store, 'old', conversation(5).slice(3), 3);
    expect(await store.listCalls('old')).toHaveLength(5);
    await store.close();
    const check = openDatabase(file);
    expect(
      check.prepare("SELECT version FROM rein_schema_migrations WHERE store = 'traces' ORDER BY version").all(),
    ).toEqual(JOURNAL_MIGRATIONS.map((m) => ({ version: m.version })));
    check.close();
  });
});
