#!/usr/bin/env node
// An example agent harness — deliberately not Rein code. It is what a team's production agent
// looks like to Rein: a program that calls an OpenAI-compatible API with the official `openai`
// client, configured only by OPENAI_BASE_URL and OPENAI_API_KEY, and uses tools.
//
//   node harness.mjs TASK.json [OUTPUT.json]      (or the task in $REIN_TASK or on stdin,
//                                                  the output to $REIN_OUTPUT_FILE or stdout)
//
// It answers a question about a tree of configuration files by exploring it with list_dir,
// read_file and search over several turns, and writes {"taskId", "answer", "turns"}.
//
// Where its tools run: with REIN_ENV_URL set, every call goes to the environment Rein serves
// (POST $REIN_ENV_URL/reset once, then POST $REIN_ENV_URL/step per call), which may be a variant
// of the world; without it (production, a plain run) the harness runs the same tools itself on
// the task's own `files`, through environment.mjs, so both answer alike.
//
// AGENT_SEED (optional) makes its sampling reproducible, as in the calculator example.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';
import environment from './environment.mjs';
import { groundedAgent } from './grounding.mjs';

const MODEL = process.env.AGENT_MODEL ?? 'production';
const TEMPERATURE = Number(process.env.AGENT_TEMPERATURE ?? 1);
const SEED = process.env.AGENT_SEED;
/** Calls limited to what the agent has seen (grounding.mjs): for models too small to spell a path. */
const GROUNDED = process.env.AGENT_GROUNDED === '1';
// A small model's context is short (the embedded policy's is 1024 tokens): fewer turns grounded.
const MAX_TURNS = Number(process.env.AGENT_MAX_TURNS ?? (GROUNDED ? 6 : 8));
const MAX_TOKENS = 160;
/** Grounded, a tool's answer is cut to this many characters, as agents cut long outputs to fit their context. */
const MAX_OBSERVATION = 240;
const SYSTEM = 'You answer questions about a read-only file tree. Explore it with the tools, then reply.';

/** The request seed of a turn: a non-negative 31-bit integer, fixed by AGENT_SEED, the rollout and the turn. */
export function seedFor(seed, rolloutId, turn) {
  return createHash('sha256').update(`${seed}\n${rolloutId}\n${turn}`).digest().readUInt32BE(0) >>> 1;
}

/** The tools run here, on the task's own files. */
export function localSession(task) {
  let state;
  return {
    async reset() {
      const first = environment.reset(task);
      state = first.state;
      return { observation: first.observation, tools: environment.tools };
    },
    async step(tool, args) {
      const next = environment.step(state, { tool, arguments: args });
      state = next.state;
      return { observation: next.observation, done: next.done };
    },
  };
}

/** The tools served by Rein's environment at `url`. */
export function remoteSession(url) {
  const base = url.replace(/\/+$/, '');
  const post = async (route, body) => {
    const response = await fetch(`${base}${route}`, {
      method: 'POST',
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`environment ${route} answered HTTP ${response.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text);
  };
  return {
    reset: () => post('/reset'),
    step: (tool, args) => post('/step', { tool, arguments: args }),
  };
}

/** A call's arguments, or null when they are not a JSON object. */
function parsedArguments(call) {
  try {
    const args = JSON.parse(call.function.arguments || '{}');
    return args !== null && typeof args === 'object' ? args : null;
  } catch {
    return null;
  }
}

/** A tool call's observation; arguments that are not JSON are the model's mistake, answered as such. */
async function callTool(session, call) {
  let args;
  try {
    args = JSON.parse(call.function.arguments || '{}');
  } catch (err) {
    return { observation: `error: the arguments are not JSON (${err.message})`, done: false };
  }
  return session.step(call.function.name, args);
}

/** A completion, or null when the conversation no longer fits the model's context (the agent gives up). */
async function complete(client, request) {
  try {
    return await client.chat.completions.create(request);
  } catch (err) {
    if (err?.status === 400 && /context length/i.test(String(err.message))) return null;
    throw err;
  }
}

const clipped = (text) =>
  text.length <= MAX_OBSERVATION ? text : `${text.slice(0, MAX_OBSERVATION)}\n(cut: ${text.length} characters)`;

/** The agent loop: the model calls tools until it replies in plain text, runs out of turns, or the episode ends. */
export async function runAgent(task, session, client = new OpenAI()) {
  const { observation, tools } = await session.reset();
  const grounded = GROUNDED ? groundedAgent(observation) : null;
  const messages = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: observation },
  ];
  let answer = null;
  let done = false;
  for (let turn = 0; turn < MAX_TURNS && answer === null && !done; turn++) {
    const offered = grounded ? grounded.tools(tools) : tools;
    if (offered.length === 0) break;
    const completion = await complete(client, {
      model: MODEL,
      messages,
      tools: offered,
      ...(grounded && { tool_choice: 'required', parallel_tool_calls: false }),
      temperature: TEMPERATURE,
      max_tokens: MAX_TOKENS,
      ...(SEED !== undefined && { seed: seedFor(SEED, process.env.REIN_ROLLOUT_ID ?? '', turn) }),
    });
    if (completion === null) break;
    const message = completion.choices[0].message;
    const calls = message.tool_calls ?? [];
    messages.push({ role: 'assistant', content: message.content, ...(calls.length && { tool_calls: calls }) });
    if (calls.length === 0) answer = (message.content ?? '').trim();
    for (const call of calls) {
      const args = parsedArguments(call);
      answer = grounded?.answerOf(call.function.name, args) ?? null;
      if (answer !== null) break;
      const result = await callTool(session, call);
      grounded?.learn(call.function.name, args, result.observation);
      const content = grounded ? clipped(result.observation) : result.observation;
      messages.push({ role: 'tool', tool_call_id: call.id, content });
      done ||= result.done;
    }
  }
  return { taskId: task.id, answer, turns: messages.filter((m) => m.role === 'assistant').length };
}

async function main() {
  const [taskFile, outputFile = process.env.REIN_OUTPUT_FILE] = process.argv.slice(2);
  const task = JSON.parse(
    taskFile ? readFileSync(taskFile, 'utf8') : (process.env.REIN_TASK ?? readFileSync(0, 'utf8')),
  );
  const envUrl = process.env.REIN_ENV_URL;
  const output = JSON.stringify(await runAgent(task, envUrl ? remoteSession(envUrl) : localSession(task)));
  if (outputFile) writeFileSync(outputFile, `${output}\n`);
  else process.stdout.write(`${output}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    process.stderr.write(`harness: ${err.message}\n`);
    process.exit(1);
  });
}
