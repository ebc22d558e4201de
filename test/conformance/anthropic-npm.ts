import Anthropic from '@anthropic-ai/sdk';
import { eventsOf, loadScenarios, paramsFor, type Scenario } from './openai-npm.js';

/**
 * Runs every Messages scenario of `file` with the @anthropic-ai/sdk npm client against one
 * endpoint (`baseURL` ends in /v1, as the openai clients take it): scenario name -> what the
 * caller got, or the API error it raised.
 */
export async function runWithAnthropicNpm(
  baseURL: string,
  apiKey: string,
  model: string,
  file: string,
): Promise<Record<string, unknown>> {
  const client = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ''), apiKey, maxRetries: 0 });
  const results: Record<string, unknown> = {};
  for (const scenario of loadScenarios(file)) {
    try {
      results[scenario.name] = await run(client, scenario, model);
    } catch (err) {
      if (!(err instanceof Anthropic.APIError) || err.status === undefined) throw err;
      results[scenario.name] = { error: { status: err.status, body: err.error } };
    }
  }
  return results;
}

async function run(client: Anthropic, scenario: Scenario, model: string): Promise<unknown> {
  const params = paramsFor(scenario, model);
  if (scenario.kind === 'create') {
    const result: unknown = await client.messages.create(params);
    return params.stream ? eventsOf(result as AsyncIterable<unknown>) : result;
  }
  if (scenario.kind !== 'stream-helper') throw new Error(`scenario ${scenario.name}: no ${scenario.kind} for messages`);
  const stream = client.messages.stream(params);
  const events = ((await eventsOf(stream)) as Array<{ type: string }>).map((event) => event.type);
  return { events, final: await stream.finalMessage() };
}
