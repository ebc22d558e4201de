import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import fc from 'fast-check';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { validateConfig } from '../../src/config/load.js';
import { type EnvironmentDefinition, environmentProblems } from '../../src/environments/contract.js';
import { environmentSchema } from '../../src/environments/settings.js';
import { packageRoot } from '../../src/package-root.js';
import type { Task } from '../../src/rollouts/tasks.js';

/**
 * The files example: an environment whose variants matter. The world a task carries must answer
 * its question in exactly one file, for the original and for every variant vary() makes, and the
 * agent's own tools (harness.mjs, with or without Rein's environment) must answer as the
 * environment does. No model is called: the "agents" here are scripted.
 */
const dir = path.join(packageRoot(), 'examples', 'files-agent');

interface Target {
  service: string;
  env: string;
  key: string;
}
interface Shape {
  services: number;
  depth: number;
  distractors: number;
  longFiles: boolean;
}
interface Session {
  reset(): Promise<{ observation: string; tools: unknown[] }>;
  step(tool: string, args: unknown): Promise<{ observation: string; done: boolean }>;
}
type FilesTask = Task & { question: string; files: Record<string, string>; answer: string };
type FilesEnvironment = Omit<EnvironmentDefinition<{ files: Record<string, string> }>, 'vary'> & {
  vary(task: Task, params: Record<string, unknown>, random: () => number): FilesTask;
};

let env: FilesEnvironment;
let world: {
  seededRandom(seed: number): () => number;
  parseQuestion(question: string): Target | null;
  shapeOf(files: Record<string, string>): Shape;
};
let verify: (task: Task, output: unknown) => { components: { success: number; format: number } };
let harness: {
  localSession(task: Task): Session;
  remoteSession(url: string): Session;
  runAgent(task: Task, session: Session, client: OpenAI): Promise<{ taskId: string; answer: string; turns: number }>;
};
let tasks: FilesTask[];

beforeAll(async () => {
  const load = async <T>(file: string) => (await import(path.join(dir, file))) as T;
  env = (await load<{ default: FilesEnvironment }>('environment.mjs')).default;
  world = await load<typeof world>('world.mjs');
  verify = (await load<{ verify: typeof verify }>('verifier.mjs')).verify;
  harness = await load<typeof harness>('harness.mjs');
  tasks = (await load<{ generate(seed: number, n: number, prefix: string): FilesTask[] }>('tasks.mjs')).generate(
    1,
    64,
    'train',
  );
});

const step = (state: { files: Record<string, string> }, tool: string, args: unknown) =>
  env.step(state, { tool, arguments: args as Record<string, unknown> }).observation;

/** The value of `key` in an ini text (exactly that key, not a look-alike), or undefined. */
const valueIn = (text: string, key: string) => new RegExp(`^${key} = (\\S+)$`, 'm').exec(text)?.[1];

/**
 * What a careful agent does: list its way down /services/<service>/…/config/<env>/ (taking config/
 * where it is, else the one folder there is) and read app.ini. Returns the value and the calls.
 */
function guidedSolve(task: FilesTask) {
  const target = world.parseQuestion(task.question)!;
  const { state } = env.reset(task);
  const calls: Array<[string, { path: string }]> = [];
  const call = (tool: string, p: string) => (calls.push([tool, { path: p }]), step(state, tool, { path: p }));
  call('list_dir', '/');
  call('list_dir', '/services');
  let at = `/services/${target.service}`;
  for (;;) {
    const entries = call('list_dir', at).split('\n');
    if (entries.includes('config/')) break;
    const folders = entries.filter((e) => e.endsWith('/'));
    expect(folders, `one way down from ${at}`).toHaveLength(1);
    at = `${at}/${folders[0]!.slice(0, -1)}`;
  }
  call('list_dir', `${at}/config/${target.env}`);
  const text = call('read_file', `${at}/config/${target.env}/app.ini`);
  return { value: valueIn(text, target.key), calls };
}

/** Every file of the world, found only through list_dir from / (what an exhaustive agent sees). */
function allFiles(state: { files: Record<string, string> }, folder = '/'): string[] {
  return step(state, 'list_dir', { path: folder })
    .split('\n')
    .flatMap((entry) => {
      const full = `${folder === '/' ? '' : folder}/${entry.replace(/\/$/, '')}`;
      return entry.endsWith('/') ? allFiles(state, full) : [full];
    });
}

/** Reads the whole tree: the answering file's value, and every other value of the same key. */
function exhaustiveSolve(task: FilesTask) {
  const target = world.parseQuestion(task.question)!;
  const { state } = env.reset(task);
  const answering = new RegExp(`^/services/${target.service}/(?:[^/]+/)*config/${target.env}/app\\.ini$`);
  const found = allFiles(state).map((p) => ({ p, value: valueIn(step(state, 'read_file', { path: p }), target.key) }));
  return {
    answers: found.filter((f) => answering.test(f.p)).map((f) => f.value),
    others: found.filter((f) => !answering.test(f.p) && f.value !== undefined).map((f) => f.value!),
  };
}

const scored = (task: Task, answer: string) => verify(task, { answer }).components.success;

describe('the files example environment', () => {
  it('meets the environment contract, and its rein.yaml is a valid config with valid variants', () => {
    expect(environmentProblems(env)).toEqual([]);
    expect(env.tools.map((t) => t.function.name)).toEqual(['list_dir', 'read_file', 'search']);
    const { environment, ...rest } = parseYaml(readFileSync(path.join(dir, 'rein.yaml'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(() => validateConfig(rest, 'rein.yaml')).not.toThrow();
    expect(environmentSchema.parse(environment).variants.map((v) => v.name)).toHaveLength(5);
  });

  it('task sets are what tasks.mjs writes, and a scripted agent solves them in five or more calls', () => {
    const lines = readFileSync(path.join(dir, 'train.jsonl'), 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(tasks);
    for (const task of tasks) {
      expect(env.reset(task).observation).toBe(task.question);
      const { value, calls } = guidedSolve(task);
      expect(value).toBe(task.answer);
      expect(calls.length).toBeGreaterThanOrEqual(5);
      expect(verify(task, { answer: value })).toEqual({ components: { success: 1, format: 1 } });
    }
  });

  it('every variant answers its question in exactly one file, and the verifier tells it from decoys', () => {
    const params = fc.record(
      {
        services: fc.integer({ min: 1, max: 16 }),
        depth: fc.integer({ min: 0, max: 8 }),
        distractors: fc.integer({ min: 0, max: 12 }),
        longFiles: fc.boolean(),
      },
      { requiredKeys: [] },
    );
    const property = fc.property(fc.nat(63), fc.integer(), params, (index, seed, change) => {
      const original = tasks[index]!;
      const varied = env.vary(original, change, world.seededRandom(seed));
      expect(env.vary(original, change, world.seededRandom(seed))).toEqual(varied);
      expect(varied.question).toBe(original.question);
      expect(world.shapeOf(varied.files)).toEqual({ ...world.shapeOf(original.files), ...change });
      const { answers, others } = exhaustiveSolve(varied);
      expect(answers).toEqual([varied.answer]);
      expect(others).not.toContain(varied.answer);
      expect(guidedSolve(varied).value).toBe(varied.answer);
      expect(scored(varied, varied.answer)).toBe(1);
      for (const wrong of new Set(others)) expect(scored(varied, wrong)).toBe(0);
    });
    fc.assert(property, { numRuns: 60 });
  });

  it('each vary parameter changes what it names', () => {
    const task = tasks[0]!;
    const base = world.shapeOf(task.files);
    const cases: Array<[Record<string, unknown>, Partial<Shape>]> = [
      [{ services: 8 }, { services: 8 }],
      [{ depth: 3 }, { depth: 3 }],
      [{ distractors: 3 }, { distractors: 3 }],
      [{ longFiles: true }, { longFiles: true }],
    ];
    for (const [params, changed] of cases) {
      const varied = env.vary(task, params, world.seededRandom(7));
      expect(world.shapeOf(varied.files)).toEqual({ ...base, ...changed });
      expect(exhaustiveSolve(varied).answers).toEqual([varied.answer]);
    }
    const long = env.vary(task, { longFiles: true }, world.seededRandom(7));
    const { key } = world.parseQuestion(task.question)!;
    const lineOfKey = long.files[Object.keys(long.files).find((p) => p.endsWith('/app.ini'))!]!.split('\n').findIndex(
      (line) => line.startsWith(`${key} =`),
    );
    expect(lineOfKey).toBeGreaterThan(50);
    expect(() => env.vary(task, { services: 0 }, Math.random)).toThrow(/"services" must be an integer from 1 to 16/);
    expect(() => env.vary(task, { folders: 2 }, Math.random)).toThrow(/unknown parameter "folders"/);
    expect(() => env.vary(task, { longFiles: 'yes' }, Math.random)).toThrow(/"longFiles" must be true or false/);
  });

  it('answers bad tool input with an error observation and never throws', () => {
    const { state } = env.reset(tasks[0]!);
    const bad: Array<[unknown, unknown]> = [
      ['list_dir', {}],
      ['list_dir', { path: 42 }],
      ['list_dir', { path: '/nowhere' }],
      ['list_dir', { path: '/README.md' }],
      ['read_file', { path: '/services' }],
      ['read_file', { path: '/services/none.ini' }],
      ['search', { pattern: '' }],
      ['search', { pattern: 'port', path: '/nowhere' }],
      ['delete_everything', { path: '/' }],
      ['read_file', ['/README.md']],
      ['read_file', null],
      [undefined, undefined],
    ];
    for (const [tool, args] of bad) expect(step(state, tool as string, args)).toMatch(/^error: /);
    const anyCall = fc.tuple(fc.oneof(fc.constantFrom('list_dir', 'read_file', 'search'), fc.string()), fc.anything());
    fc.assert(
      fc.property(anyCall, ([tool, args]) => {
        expect(typeof step(state, tool, args)).toBe('string');
      }),
      { numRuns: 300 },
    );
    expect(step(state, 'list_dir', { path: '/services/../' })).toBe('README.md\nservices/');
    expect(step(state, 'search', { pattern: 'NO SUCH TEXT' })).toMatch(/^no lines contain/);
  });
});

describe('the files example harness', () => {
  let server: http.Server;
  let url: string;
  const received: unknown[] = [];

  /** Rein's side of REIN_ENV_URL, minimally: one session of the environment over HTTP. */
  beforeAll(async () => {
    let state: { files: Record<string, string> } | undefined;
    server = http.createServer((req, res) => {
      const pieces: Buffer[] = [];
      req.on('data', (d: Buffer) => pieces.push(d));
      req.on('end', () => {
        const send = (body: unknown) =>
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
        const task = tasks[3]!;
        if (req.url === '/reset') {
          const first = env.reset(task);
          state = first.state;
          return send({ observation: first.observation, tools: env.tools });
        }
        const action = JSON.parse(Buffer.concat(pieces).toString()) as {
          tool: string;
          arguments: Record<string, unknown>;
        };
        received.push(action);
        const next = env.step(state!, action);
        state = next.state;
        send({ observation: next.observation, done: next.done });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('its own tools, the environment and the served environment answer alike', async () => {
    const task = tasks[3]!;
    const { calls } = guidedSolve(task);
    const sequence: Array<[string, unknown]> = [...calls, ['search', { pattern: 'port' }], ['read_file', {}]];
    const { state } = env.reset(task);
    const local = harness.localSession(task);
    const remote = harness.remoteSession(url);
    expect((await local.reset()).observation).toBe(task.question);
    expect(await remote.reset()).toEqual(await local.reset());
    for (const [tool, args] of sequence) {
      const expected = { observation: step(state, tool, args), done: false };
      expect(await local.step(tool, args)).toEqual(expected);
      expect(await remote.step(tool, args)).toEqual(expected);
    }
  });

  it('runs its agent loop with the official client against a scripted model and the served environment', async () => {
    const task = tasks[3]!;
    const { calls } = guidedSolve(task);
    received.length = 0;
    // The scripted "model": turn n makes call n of the careful agent, then replies with the value it read.
    const model = http.createServer((req, res) => {
      const pieces: Buffer[] = [];
      req.on('data', (d: Buffer) => pieces.push(d));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(pieces).toString()) as {
          messages: Array<{ role: string; content: string }>;
        };
        const turn = body.messages.filter((m) => m.role === 'assistant').length;
        const lastTool = body.messages.at(-1)!.content;
        const [tool, args] = calls[turn] ?? [];
        const message = tool
          ? {
              content: null,
              tool_calls: [
                { id: `c${turn}`, type: 'function', function: { name: tool, arguments: JSON.stringify(args) } },
              ],
            }
          : { content: valueIn(lastTool, world.parseQuestion(task.question)!.key) };
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            id: `t${turn}`,
            object: 'chat.completion',
            created: 0,
            model: 'scripted',
            choices: [
              { index: 0, message: { role: 'assistant', ...message }, finish_reason: tool ? 'tool_calls' : 'stop' },
            ],
          }),
        );
      });
    });
    await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
    try {
      const client = new OpenAI({
        baseURL: `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`,
        apiKey: 'x',
      });
      const output = await harness.runAgent(task, harness.remoteSession(url), client);
      expect(output).toEqual({ taskId: task.id, answer: task.answer, turns: calls.length + 1 });
      expect(received).toEqual(calls.map(([tool, args]) => ({ tool, arguments: args })));
      expect(verify(task, output).components.success).toBe(1);
    } finally {
      await new Promise<void>((resolve) => model.close(() => resolve()));
    }
  });
});
