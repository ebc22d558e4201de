import { describe, expect, it } from 'vitest';
import type { CallRecord } from '../store/trace-store.js';
import type { HarnessRun } from './executor.js';
import { classifyFailure } from './failure-class.js';
import type { RolloutEvent } from './rollout.js';

const crashed: HarnessRun = {
  exitCode: 1,
  killedBy: null,
  timedOut: false,
  cancelled: false,
  problem: null,
  logTail: 'Error: boom\n',
  seconds: 1.5,
  where: { host: 'local' },
};

function call(id: string, at: number, response: unknown, extra: Partial<CallRecord> = {}): CallRecord {
  return {
    id,
    rolloutId: 'r',
    attempt: 1,
    seq: 0,
    endpoint: 'chat.completions',
    policyVersion: 'v1',
    backendUrl: 'http://b',
    stream: false,
    requestReceived: {},
    requestSent: {},
    startedAt: at,
    latencyMs: 10,
    status: 'ok',
    response,
    upstreamStatus: 200,
    errorClass: null,
    choices: [{ completionIds: [1], logprobs: [-0.1], finishReason: 'stop' }],
    ...extra,
  };
}
const chat = (message: Record<string, unknown>) => ({
  choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: 'stop' }],
});
function span(at: number, payload: Record<string, unknown>): RolloutEvent {
  return {
    id: at,
    rolloutId: 'r',
    attempt: 1,
    type: 'span',
    source: 'rollout',
    actionId: String(payload.name),
    payload: { kind: 'tool', permission: 'not_applicable', ...payload },
    at: new Date(at).toISOString(),
  };
}

describe('classifyFailure', () => {
  it('finds nothing wrong with a clean exit, whatever the journal holds', () => {
    expect(
      classifyFailure(
        { ...crashed, exitCode: 0 },
        [call('c1', 1000, chat({ content: "I'm sorry, but I can't help with that." }))],
        [],
      ),
    ).toBeNull();
  });

  it('blames tool arguments that are not JSON on the policy output, and a refusal in either API shape', () => {
    const malformed = classifyFailure(
      crashed,
      [
        call(
          'c1',
          1000,
          chat({ tool_calls: [{ id: 't', type: 'function', function: { name: 'calc', arguments: '{"x": "1+' } }] }),
        ),
      ],
      [],
    );
    expect(malformed).toMatchObject({
      failureClass: 'policy_output',
      evidence: { problem: 'malformed_arguments', detail: '{"x": "1+', callId: 'c1', exitCode: 1 },
    });
    expect(
      classifyFailure(crashed, [call('c1', 1000, chat({ content: "I'm sorry, but I can't help with that." }))], []),
    ).toMatchObject({ failureClass: 'model', evidence: { problem: 'refusal' } });
    expect(
      classifyFailure(crashed, [call('c1', 1000, chat({ content: 'ok', refusal: 'policy says no' }))], []),
    ).toMatchObject({ evidence: { problem: 'refusal', detail: 'policy says no' } });
    const responses = { output: [{ type: 'message', content: [{ type: 'refusal', refusal: 'no' }] }] };
    expect(classifyFailure(crashed, [call('c1', 1000, responses, { endpoint: 'responses' })], [])).toMatchObject({
      failureClass: 'model',
      evidence: { problem: 'refusal' },
    });
  });

  it('takes the last thing that went wrong before the crash as its cause', () => {
    const cut = call('c2', 2000, chat({ content: 'The answ' }), {
      choices: [{ completionIds: [1], logprobs: [-1], finishReason: 'length' }],
    });
    const toolFailed = span(1500, { name: 'calc', failure: 'timeout' });
    expect(classifyFailure(crashed, [call('c1', 1000, chat({ content: 'x' })), cut], [toolFailed])).toMatchObject({
      failureClass: 'model',
      evidence: { problem: 'max_tokens' },
    });
    expect(classifyFailure(crashed, [cut], [span(2500, { name: 'calc', failure: 'timeout' })])).toMatchObject({
      failureClass: 'tool',
    });
    // A failed tool the harness recovered from (a later span went well) is not the cause.
    expect(
      classifyFailure(crashed, [call('c1', 1000, chat({ content: 'x' }))], [toolFailed, span(1800, { name: 'calc' })]),
    ).toMatchObject({ failureClass: 'harness', reason: 'the harness exited with 1: Error: boom' });
  });

  it('puts an upstream failure before anything the model or a tool did, and a timeout or lost run before all', () => {
    const broken = call('c1', 1000, null, { status: 'error', upstreamStatus: 503, errorClass: 'upstream_http_error' });
    expect(classifyFailure(crashed, [broken], [span(2000, { name: 'shell', permission: 'denied' })])).toMatchObject({
      failureClass: 'infrastructure',
      evidence: { callId: 'c1', upstreamStatus: 503 },
    });
    expect(
      classifyFailure({ ...crashed, exitCode: null, killedBy: 'SIGTERM', timedOut: true }, [broken], []),
    ).toMatchObject({ failureClass: 'timeout' });
    const evicted = {
      ...crashed,
      problem: { failureClass: 'infrastructure' as const, reason: 'the pod was evicted' },
      where: { job: 'rein-x' },
    };
    expect(classifyFailure(evicted, [], [])).toEqual({
      failureClass: 'infrastructure',
      reason: 'the pod was evicted',
      evidence: expect.objectContaining({ job: 'rein-x' }),
    });
  });

  it("names the backend's own reason when the harness crashed after the backend refused its last call", () => {
    const said =
      "the backend answered 400: This model's maximum context length is 1024 tokens. However, you requested 2658";
    const refused = call('c2', 1000, null, {
      status: 'error',
      upstreamStatus: 400,
      errorClass: 'upstream_http_error',
      errorMessage: said,
    });
    const failure = classifyFailure(crashed, [call('c1', 500, chat({ content: 'hi' })), refused], []);
    expect(failure).toMatchObject({
      failureClass: 'harness',
      evidence: { callId: 'c2', upstreamStatus: 400, errorMessage: said },
    });
    expect(failure?.reason).toBe(`the harness exited with 1 after model call c2 failed: ${said}; log: Error: boom`);
  });

  it('calls a failed irreversible action irreversible, even when the harness exited 0 or timed out', () => {
    const deleted = span(1500, { name: 'drop_table', failure: 'deleted the wrong table', irreversible: true });
    expect(
      classifyFailure({ ...crashed, exitCode: 0 }, [call('c1', 1000, chat({ content: 'done' }))], [deleted]),
    ).toMatchObject({
      failureClass: 'irreversible',
      reason: 'irreversible tool "drop_table" failed: deleted the wrong table',
      evidence: { actionId: 'drop_table' },
    });
    expect(classifyFailure({ ...crashed, timedOut: true }, [], [deleted])).toMatchObject({
      failureClass: 'irreversible',
    });
    // An irreversible action that went well is just an action.
    expect(
      classifyFailure({ ...crashed, exitCode: 0 }, [], [span(1500, { name: 'send', irreversible: true })]),
    ).toBeNull();
  });

  it('classes a crash after a model output the harness could not parse as policy_output, with the call and what', () => {
    const tools = [{ type: 'function', function: { name: 'calc', parameters: { type: 'object' } } }];
    const offered = { requestReceived: { model: 'm', messages: [], tools } };
    const toolCall = (name: string, args: string) =>
      chat({ tool_calls: [{ id: 'call_7', type: 'function', function: { name, arguments: args } }] });
    // A tool the request never offered.
    expect(classifyFailure(crashed, [call('c1', 1000, toolCall('calculator', '{}'), offered)], [])).toEqual({
      failureClass: 'policy_output',
      reason: 'the harness exited with 1 after model call c1 called a tool it was not offered: "calculator"',
      evidence: expect.objectContaining({
        callId: 'c1',
        seq: 0,
        problem: 'unknown_tool',
        detail: 'calculator',
        toolCallId: 'call_7',
        exitCode: 1,
      }),
    });
    // Arguments that are JSON but not an object.
    expect(classifyFailure(crashed, [call('c1', 1000, toolCall('calc', '"6*7"'), offered)], [])).toMatchObject({
      failureClass: 'policy_output',
      evidence: { problem: 'malformed_arguments', detail: '"6*7"', toolCallId: 'call_7' },
    });
    // A tool call the server's parser left in the text (offered tools, no parsed call).
    const leftInText = chat({ content: '<tool_call>\n{"name": "calc", "arguments": {"x": 1+}}\n</tool_call>' });
    expect(classifyFailure(crashed, [call('c1', 1000, leftInText, offered)], [])).toMatchObject({
      failureClass: 'policy_output',
      evidence: { problem: 'unparsed_tool_call', detail: expect.stringContaining('<tool_call>') },
    });
    // In the Responses shape too.
    const responsesTools = { requestReceived: { input: 'x', tools: [{ type: 'function', name: 'calc' }] } };
    const responses = { output: [{ type: 'function_call', call_id: 'fc_1', name: 'shell', arguments: '{}' }] };
    expect(
      classifyFailure(crashed, [call('c1', 1000, responses, { endpoint: 'responses', ...responsesTools })], []),
    ).toMatchObject({ failureClass: 'policy_output', evidence: { problem: 'unknown_tool', toolCallId: 'fc_1' } });
    // A well-formed call of an offered tool, or a request that listed no tools: nothing to blame on the output.
    expect(classifyFailure(crashed, [call('c1', 1000, toolCall('calc', '{"x": 1}'), offered)], [])).toMatchObject({
      failureClass: 'harness',
    });
    expect(classifyFailure(crashed, [call('c1', 1000, toolCall('anything', '{}'))], [])).toMatchObject({
      failureClass: 'harness',
    });
    // A clean exit after an unparsable output is no failure: the harness coped.
    expect(
      classifyFailure({ ...crashed, exitCode: 0 }, [call('c1', 1000, toolCall('calculator', '{}'), offered)], []),
    ).toBeNull();
  });
});
