import { readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

/**
 * A conformance scenario, shared with the Python SDKs' runners (openai_sdk.py, anthropic_sdk.py):
 * chat and completions in scenarios.json, the Responses API in responses.json, the Messages API in
 * messages.json.
 */
export interface Scenario {
  name: string;
  endpoint: 'chat' | 'completions' | 'responses' | 'messages';
  kind: 'create' | 'stream-helper' | 'abort';
  params: Record<string, unknown>;
}

export const SCENARIOS_FILE = path.join(import.meta.dirname, 'scenarios.json');

export function loadScenarios(file = SCENARIOS_FILE): Scenario[] {
  return (JSON.parse(readFileSync(file, 'utf8')) as { scenarios: Scenario[] }).scenarios;
}

/** A scenario's params as the wire body, "$MODEL" replaced by the model this side asks for (typed loosely). */
export function paramsFor(scenario: Scenario, model: string): any {
  return JSON.parse(JSON.stringify(scenario.params).replaceAll('"$MODEL"', JSON.stringify(model)));
}

/** The events of a stream, in order, as the caller iterates them. */
export async function eventsOf(stream: AsyncIterable<unknown>): Promise<unknown[]> {
  const events: unknown[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

/**
 * Runs every scenario of `file` (chat, completions or the Responses API) with the openai npm
 * client against one endpoint: scenario name -> what the caller got.
 */
export async function runWithNpmClient(
  baseURL: string,
  apiKey: string,
  model: string,
  file = SCENARIOS_FILE,
): Promise<Record<string, unknown>> {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const results: Record<string, unknown> = {};
  for (const scenario of loadScenarios(file)) {
    try {
      results[scenario.name] = await run(client, scenario, model);
    } catch (err) {
      if (!(err instanceof OpenAI.APIError) || err.status === undefined) throw err;
      results[scenario.name] = { error: { status: err.status, body: err.error } };
    }
  }
  return results;
}

// The SDK's overloads cannot be chosen from data: the scenario's params are the wire body, typed loosely.
async function run(client: OpenAI, scenario: Scenario, model: string): Promise<unknown> {
  const params = paramsFor(scenario, model);
  if (scenario.endpoint === 'responses') return runResponses(client, scenario, params);
  const api: any = scenario.endpoint === 'chat' ? client.chat.completions : client.completions;
  if (scenario.kind === 'create') {
    const result = await api.create(params);
    return params.stream ? eventsOf(result) : result;
  }
  if (scenario.kind === 'stream-helper') {
    const stream = client.chat.completions.stream(params);
    const events: string[] = [];
    for (const type of [
      'content.delta',
      'content.done',
      'tool_calls.function.arguments.delta',
      'tool_calls.function.arguments.done',
    ] as const) {
      stream.on(type as any, () => events.push(type));
    }
    return { events, final: await stream.finalChatCompletion() };
  }
  const stream = await api.create(params);
  for await (const chunk of stream) {
    stream.controller.abort();
    return chunk;
  }
  throw new Error(`scenario ${scenario.name}: the stream ended before its first chunk`);
}

async function runResponses(client: OpenAI, scenario: Scenario, params: any): Promise<unknown> {
  if (scenario.kind === 'create') {
    const result: unknown = await client.responses.create(params);
    return params.stream ? eventsOf(result as AsyncIterable<unknown>) : result;
  }
  if (scenario.kind !== 'stream-helper')
    throw new Error(`scenario ${scenario.name}: no ${scenario.kind} for responses`);
  const stream = client.responses.stream(params);
  const events = ((await eventsOf(stream)) as Array<{ type: string }>).map((event) => event.type);
  return { events, final: await stream.finalResponse() };
}
