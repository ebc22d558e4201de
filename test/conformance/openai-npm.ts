import { readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';

/** The conformance scenarios (scenarios.json), shared with the Python SDK's runner (openai_sdk.py). */
export interface Scenario {
  name: string;
  endpoint: 'chat' | 'completions';
  kind: 'create' | 'stream-helper' | 'abort';
  params: Record<string, unknown>;
}

export const SCENARIOS_FILE = path.join(import.meta.dirname, 'scenarios.json');

export function loadScenarios(): Scenario[] {
  return (JSON.parse(readFileSync(SCENARIOS_FILE, 'utf8')) as { scenarios: Scenario[] }).scenarios;
}

/** Runs every scenario with the openai npm client against one endpoint: scenario name -> what the caller got. */
export async function runWithNpmClient(
  baseURL: string,
  apiKey: string,
  model: string,
): Promise<Record<string, unknown>> {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const results: Record<string, unknown> = {};
  for (const scenario of loadScenarios()) {
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
  const params = JSON.parse(JSON.stringify(scenario.params).replaceAll('"$MODEL"', JSON.stringify(model))) as any;
  const api: any = scenario.endpoint === 'chat' ? client.chat.completions : client.completions;
  if (scenario.kind === 'create') {
    const result = await api.create(params);
    if (!params.stream) return result;
    const chunks: unknown[] = [];
    for await (const chunk of result) chunks.push(chunk);
    return chunks;
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
