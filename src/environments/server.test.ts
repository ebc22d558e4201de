import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEnvironment, type LoadedEnvironment } from './load.js';
import { EnvironmentServer } from './server.js';
import { EnvironmentSession } from './session.js';
import { variantId, type VariantSpec } from './variant-spec.js';

const CALCULATOR = path.join(import.meta.dirname, '..', '..', 'examples', 'calculator-agent', 'environment.mjs');
const task = { id: 't1', question: '2 plus 3?', answer: 5 };

let server: EnvironmentServer;
let calculator: LoadedEnvironment;
beforeAll(async () => {
  server = await EnvironmentServer.start();
  calculator = await loadEnvironment(CALCULATOR);
});
afterAll(() => server.close());

const post = async (url: string, body?: unknown) => {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

const open = (spec: VariantSpec | null) =>
  server.open(new EnvironmentSession(calculator, task, spec && { id: variantId(calculator.id, spec), spec }, 7));

describe('environment sessions over HTTP', () => {
  it('answers a harness’s reset and steps as the environment does, and records what the attempt did', async () => {
    const session = open(null);
    expect(await post(`${session.url}/reset`)).toEqual({
      status: 200,
      body: { observation: '2 plus 3?', tools: calculator.definition.tools },
    });
    expect((await post(`${session.url}/step`, { tool: 'calc', arguments: { x: '2+3' } })).body).toEqual({
      observation: '5',
      done: false,
    });
    expect((await post(`${session.url}/step`, { tool: 'calc', arguments: { x: 'two' } })).body.observation).toMatch(
      /^error: /,
    );
    expect(session.end()).toEqual({
      environment: calculator.id,
      variant: null,
      steps: 2,
      errors: 1,
      byTool: { calc: { calls: 2, errors: 1 } },
      done: false,
    });
    expect(await post(`${session.url}/step`, { tool: 'calc', arguments: { x: '1' } })).toMatchObject({
      status: 404,
      body: { error: { code: 'no_session' } },
    });
  });

  it('applies the variant’s rules and observations around the same environment', async () => {
    const spec: VariantSpec = {
      name: 'flaky-worded',
      rules: { transientErrors: { every: 2 } },
      observations: { template: 'The calculator says: {observation}' },
    };
    const session = open(spec);
    const step = async () => (await post(`${session.url}/step`, { tool: 'calc', arguments: { x: '6*7' } })).body;
    expect(await step()).toEqual({ observation: 'The calculator says: 42', done: false });
    expect((await step()).observation).toMatch(/^The calculator says: error: temporarily unavailable/);
    expect(await step()).toEqual({ observation: 'The calculator says: 42', done: false });
    expect(session.end()).toMatchObject({ variant: variantId(calculator.id, spec), steps: 3, errors: 1 });
  });

  it('says what is wrong with a bad action, and names an environment that fails as the environment', async () => {
    const session = open(null);
    expect(await post(`${session.url}/step`, { arguments: {} })).toMatchObject({
      status: 400,
      body: { error: { code: 'bad_action', message: expect.stringContaining('tool') } },
    });
    const broken = server.open(
      new EnvironmentSession(
        {
          ...calculator,
          definition: {
            ...calculator.definition,
            step: () => {
              throw new Error('boom');
            },
          },
        },
        task,
        null,
        1,
      ),
    );
    expect(await post(`${broken.url}/step`, { tool: 'calc', arguments: {} })).toMatchObject({
      status: 500,
      body: { error: { code: 'environment_error', message: 'the environment failed: boom' } },
    });
    session.end();
    broken.end();
  });
});
