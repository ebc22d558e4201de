import { describe, expect, it } from 'vitest';
import { SqliteTraceStore } from '../store/sqlite-store.js';
import {
  actionOf,
  aggregateShadowCalls,
  compareActions,
  formatShadowReport,
  rolloutOutcome,
  shadowReport,
  type Action,
  type ShadowObservation,
} from './report.js';

const answer = (content: string | null) => ({
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
});
const tools = (...calls: Array<[string, string]>) => ({
  choices: [
    {
      index: 0,
      message: {
        role: 'assistant',
        content: null,
        tool_calls: calls.map(([name, args], i) => ({
          id: `call_${i}`,
          type: 'function',
          function: { name, arguments: args },
        })),
      },
      finish_reason: 'tool_calls',
    },
  ],
});

describe('actionOf', () => {
  it('reads the first choice: its tool calls with canonical arguments, else its trimmed answer', () => {
    expect(actionOf('chat.completions', tools(['calculator', '{"b": 2, "a": {"y": 1, "x": [3]}}']))).toEqual({
      kind: 'tools',
      calls: [{ name: 'calculator', arguments: '{"a":{"x":[3],"y":1},"b":2}' }],
    });
    expect(actionOf('chat.completions', tools(['shell', 'not json ']))).toEqual({
      kind: 'tools',
      calls: [{ name: 'shell', arguments: 'not json' }],
    });
    expect(actionOf('chat.completions', answer('  42\n'))).toEqual({ kind: 'answer', text: '42' });
    expect(actionOf('chat.completions', answer(null))).toEqual({ kind: 'answer', text: '' });
    const second = { index: 1, message: { role: 'assistant', content: 'second' } };
    expect(
      actionOf('chat.completions', {
        choices: [second, { index: 0, message: { role: 'assistant', content: 'first' } }],
      }),
    ).toEqual({ kind: 'answer', text: 'first' });
    expect(actionOf('completions', { choices: [{ index: 0, text: ' -> HI ' }] })).toEqual({
      kind: 'answer',
      text: '-> HI',
    });
    expect(
      actionOf('responses', { output: [{ type: 'message', content: [{ type: 'output_text', text: 'ok ' }] }] }),
    ).toEqual({ kind: 'answer', text: 'ok' });
    expect(actionOf('responses', { output: [{ type: 'function_call', name: 'f', arguments: '{"q":1}' }] })).toEqual({
      kind: 'tools',
      calls: [{ name: 'f', arguments: '{"q":1}' }],
    });
  });

  it('finds no action in a response without one', () => {
    expect(actionOf('chat.completions', undefined)).toBeUndefined();
    expect(actionOf('chat.completions', 'engine crashed')).toBeUndefined();
    expect(actionOf('chat.completions', { choices: [] })).toBeUndefined();
    expect(actionOf('responses', {})).toBeUndefined();
    expect(actionOf('messages', {})).toBeUndefined();
  });

  it("reads a Messages answer's tool use and text as the chat message it translates", () => {
    const use = { type: 'tool_use', id: 'toolu_1', name: 'calc', input: { x: '2+2' } };
    expect(actionOf('messages', { content: [{ type: 'text', text: 'Let me see.' }, use] })).toEqual({
      kind: 'tools',
      calls: [{ name: 'calc', arguments: '{"x":"2+2"}' }],
    });
    expect(actionOf('messages', { content: [{ type: 'text', text: ' 4 ' }] })).toEqual({ kind: 'answer', text: '4' });
  });
});

describe('compareActions', () => {
  const call = (name: string, args: string): Action => ({ kind: 'tools', calls: [{ name, arguments: args }] });
  it('tells each kind of disagreement apart', () => {
    expect(compareActions(call('calc', '{"a":1}'), call('calc', '{"a":1}'))).toBe('same');
    expect(compareActions(call('calc', '{"a":1}'), call('search', '{"a":1}'))).toBe('different_tool');
    expect(compareActions(call('calc', '{"a":1}'), call('calc', '{"a":2}'))).toBe('different_arguments');
    expect(
      compareActions(call('calc', '{}'), {
        kind: 'tools',
        calls: [
          { name: 'calc', arguments: '{}' },
          { name: 'calc', arguments: '{}' },
        ],
      }),
    ).toBe('different_tool');
    expect(compareActions({ kind: 'answer', text: '42' }, { kind: 'answer', text: '42' })).toBe('same');
    expect(compareActions({ kind: 'answer', text: '42' }, { kind: 'answer', text: '41' })).toBe('different_answer');
    expect(compareActions({ kind: 'answer', text: '42' }, call('calc', '{}'))).toBe('tool_vs_answer');
    expect(compareActions(call('calc', '{}'), { kind: 'answer', text: '' })).toBe('tool_vs_answer');
  });
});

describe('rolloutOutcome', () => {
  const reward = (value: number, source: 'admin' | 'rollout' = 'admin', attempt = 1) => ({
    type: 'reward' as const,
    source,
    attempt,
    payload: { value },
  });
  it("reads the verifier's reward of the final attempt, not the harness's", () => {
    expect(rolloutOutcome('succeeded', [reward(0), reward(1, 'admin', 2)])).toBe('rewarded');
    expect(rolloutOutcome('succeeded', [reward(1), reward(0, 'admin', 2)])).toBe('unrewarded');
    expect(rolloutOutcome('succeeded', [reward(1, 'rollout')])).toBe('unscored');
    expect(rolloutOutcome('failed', [])).toBe('unrewarded');
    expect(rolloutOutcome('running', [])).toBe('unscored');
  });
});

describe('aggregateShadowCalls', () => {
  let n = 0;
  const observation = (
    outcome: ShadowObservation['outcome'],
    incumbent: Action | undefined,
    candidate: Action | undefined,
    errorClass: ShadowObservation['shadow']['errorClass'] = null,
  ): ShadowObservation => {
    n++;
    return {
      shadow: {
        id: `s${n}`,
        primaryCallId: `c${n}`,
        rolloutId: `r-${outcome}`,
        incumbentVersion: 'v1',
        status: errorClass ? 'error' : 'ok',
        errorClass,
      },
      outcome,
      incumbent,
      candidate,
    };
  };
  const a = (text: string): Action => ({ kind: 'answer', text });
  const t = (name: string, args = '{}'): Action => ({ kind: 'tools', calls: [{ name, arguments: args }] });

  it('counts execution failures apart from disagreement, and splits disagreement by outcome', () => {
    const report = aggregateShadowCalls(
      'v2',
      [
        observation('rewarded', a('42'), a('42')),
        observation('rewarded', t('calc', '{"e":"6*7"}'), t('calc', '{"e":"42"}')),
        observation('rewarded', t('calc'), t('search')),
        observation('unrewarded', a('41'), a('42')),
        observation('unrewarded', a('41'), t('calc')),
        observation('unrewarded', a('41'), a('43')),
        observation('unscored', undefined, a('x')),
        observation('rewarded', a('42'), undefined, 'upstream_unreachable'),
        observation('unrewarded', a('41'), undefined, 'upstream_unreachable'),
        observation('unrewarded', a('41'), undefined, 'upstream_timeout'),
      ],
      1,
    );
    expect(report).toMatchObject({
      candidate: 'v2',
      incumbents: ['v1'],
      rollouts: 3,
      mirrored: 10,
      executionFailures: { total: 3, byClass: { upstream_unreachable: 2, upstream_timeout: 1 } },
      completed: 7,
      incomparable: 1,
      compared: 6,
      actions: { same: 1, different_tool: 1, different_arguments: 1, different_answer: 2, tool_vs_answer: 1 },
      disagreementRate: 5 / 6,
      byOutcome: {
        rewarded: {
          rollouts: 1,
          compared: 3,
          disagreed: 2,
          disagreementRate: 2 / 3,
          kinds: { different_tool: 1, different_arguments: 1, different_answer: 0, tool_vs_answer: 0 },
        },
        unrewarded: {
          rollouts: 1,
          compared: 3,
          disagreed: 3,
          disagreementRate: 1,
          kinds: { different_answer: 2, tool_vs_answer: 1 },
        },
        unscored: { rollouts: 1, compared: 0, disagreed: 0, disagreementRate: null },
      },
    });
    expect(report.executionFailures.examples.upstream_unreachable).toHaveLength(1);
    // Capped at one example per kind.
    expect(report.examples.different_answer).toEqual([
      {
        shadowCallId: expect.any(String),
        primaryCallId: expect.any(String),
        rolloutId: 'r-unrewarded',
        outcome: 'unrewarded',
        incumbent: 'answer "41"',
        candidate: 'answer "42"',
      },
    ]);
    expect(report.examples.different_arguments[0]).toMatchObject({
      incumbent: 'calc({"e":"6*7"})',
      candidate: 'calc({"e":"42"})',
    });

    const text = formatShadowReport(report);
    expect(text).toContain('shadow report: candidate v2 vs v1');
    expect(text).toContain('10 mirrored calls over 3 rollouts');
    expect(text).toMatch(/execution failures .*: 3 \(30\.0%\): upstream_unreachable 2, upstream_timeout 1/);
    expect(text).toMatch(/different final answer\s+2\s+33\.3%/);
    expect(text).toMatch(/rewarded \(reward > 0\)\s+1\s+3\s+2\s+66\.7%/);
    expect(text).toContain('different arguments: ');
  });

  it('reports an empty mirror plainly', () => {
    const report = aggregateShadowCalls('v2', []);
    expect(report).toMatchObject({ mirrored: 0, compared: 0, disagreementRate: null });
    expect(formatShadowReport(report)).toBe(
      'shadow report: candidate v2 vs (no incumbent)\n0 mirrored calls over 0 rollouts\n',
    );
  });
});

describe('shadowReport', () => {
  it("reads the journal: the primary call's response, the rollout's reward, the shadow's answer", async () => {
    const store = new SqliteTraceStore(':memory:');
    const primary = async (rolloutId: string, id: string, response: unknown) => {
      await store.beginCall({
        id,
        rolloutId,
        attempt: 1,
        endpoint: 'chat.completions',
        policyVersion: 'v1',
        backendUrl: 'http://prod/v1',
        stream: false,
        requestReceived: { model: 'production', messages: [{ role: 'user', content: id }] },
        requestSent: { model: 'base', messages: [{ role: 'user', content: id }] },
        startedAt: 1,
      });
      await store.finishCall(id, {
        response,
        promptIds: null,
        choices: [],
        usage: null,
        upstreamStatus: 200,
        errorClass: null,
        errorMessage: null,
        ttftMs: 1,
        latencyMs: 1,
      });
    };
    const shadow = (rolloutId: string, primaryCallId: string, candidateVersion: string, response: unknown) =>
      store.recordShadowCall({
        id: `shadow-${primaryCallId}-${candidateVersion}`,
        primaryCallId,
        rolloutId,
        attempt: 1,
        candidateVersion,
        incumbentVersion: 'v1',
        endpoint: 'chat.completions',
        backendUrl: 'http://cand/v1',
        requestSent: { model: 'cand', messages: [{ role: 'user', content: primaryCallId }], stream: false },
        response,
        choices: [],
        status: response ? 'ok' : 'error',
        errorClass: response ? null : 'upstream_http_error',
        errorMessage: null,
        upstreamStatus: response ? 200 : 500,
        latencyMs: 1,
        startedAt: 1,
      });
    await store.createRollout({ id: 'good' });
    await store.createRollout({ id: 'bad' });
    await store.appendEvent('good', 1, { type: 'reward', value: 1, components: {} }, 'admin');
    await store.appendEvent('bad', 1, { type: 'reward', value: 1, components: {} }, 'rollout');
    await store.setRolloutStatus('bad', { status: 'failed', failureClass: 'model' }, 'admin');
    await primary('good', 'g1', tools(['calc', '{"e":"6*7"}']));
    await primary('good', 'g2', answer('42'));
    await primary('bad', 'b1', answer('41'));
    await shadow('good', 'g1', 'v2', tools(['calc', '{ "e": "6*7" }']));
    await shadow('good', 'g2', 'v2', answer('forty-two'));
    await shadow('bad', 'b1', 'v2', answer('42'));
    await shadow('bad', 'b1', 'v3', null);

    const report = await shadowReport(store, { candidate: 'v2' });
    expect(report).toMatchObject({
      mirrored: 3,
      compared: 3,
      actions: { same: 1, different_answer: 2 },
      executionFailures: { total: 0 },
      byOutcome: { rewarded: { compared: 2, disagreed: 1 }, unrewarded: { compared: 1, disagreed: 1 } },
    });
    expect(await shadowReport(store, { candidate: 'v2', rolloutIds: ['bad'] })).toMatchObject({
      mirrored: 1,
      rollouts: 1,
    });
    expect(await shadowReport(store, { candidate: 'v3' })).toMatchObject({
      mirrored: 1,
      compared: 0,
      executionFailures: {
        total: 1,
        byClass: { upstream_http_error: 1 },
        examples: { upstream_http_error: ['shadow-b1-v3'] },
      },
    });
    await store.close();
  });
});
