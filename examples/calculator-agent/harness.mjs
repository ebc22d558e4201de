#!/usr/bin/env node
// An example agent harness — deliberately not Rein code. It is what a team's production agent
// looks like to Rein: a program that calls an OpenAI-compatible API with the official `openai`
// client, configured only by OPENAI_BASE_URL and OPENAI_API_KEY, and uses a tool.
//
//   node harness.mjs TASK.json [OUTPUT.json]      (or the task in $REIN_TASK or on stdin,
//                                                  the output to $REIN_OUTPUT_FILE or stdout)
//
// It answers arithmetic word problems with a calculator tool over several turns and writes
// {"answer": "..."} to OUTPUT (or stdout).
//
// AGENT_SEED (optional) makes its sampling reproducible: every request then carries the OpenAI
// `seed` field (vLLM and Rein's embedded policy server honour it per request), derived from
// AGENT_SEED, the rollout Rein runs it for ($REIN_ROLLOUT_ID) and the turn, so the rollouts of a
// group still sample differently and each samples the same way every time.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import OpenAI from 'openai';

const MODEL = process.env.AGENT_MODEL ?? 'production';
const MAX_TURNS = Number(process.env.AGENT_MAX_TURNS ?? 4);
const TEMPERATURE = Number(process.env.AGENT_TEMPERATURE ?? 1);
const SEED = process.env.AGENT_SEED;
/** The tool it offers its model (and, with Rein, the environment answers: environment.mjs). */
export const tools = [
  {
    type: 'function',
    function: {
      name: 'calc',
      description: 'Evaluates an arithmetic expression with integers, + - * and parentheses.',
      parameters: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] },
    },
  },
];

/** The tool: integer arithmetic only, evaluated without eval. */
export function calculate(expression) {
  const tokens = String(expression).match(/\d+|[-+*()]/g) ?? [];
  if (tokens.join('') !== String(expression).replace(/\s+/g, ''))
    throw new Error(`cannot evaluate ${JSON.stringify(expression)}`);
  let at = 0;
  const primary = () => {
    const token = tokens[at++];
    if (token === '(') {
      const value = sum();
      if (tokens[at++] !== ')') throw new Error('missing )');
      return value;
    }
    if (token === '-') return -primary();
    if (token === undefined || !/^\d+$/.test(token)) throw new Error(`unexpected ${token ?? 'end'}`);
    return Number(token);
  };
  const product = () => {
    let value = primary();
    while (tokens[at] === '*') (at++, (value *= primary()));
    return value;
  };
  const sum = () => {
    let value = product();
    while (tokens[at] === '+' || tokens[at] === '-')
      value = tokens[at++] === '+' ? value + product() : value - product();
    return value;
  };
  const value = sum();
  if (at !== tokens.length) throw new Error(`unexpected ${tokens[at]}`);
  return value;
}

/** The request seed of a turn: a non-negative 31-bit integer, fixed by AGENT_SEED, the rollout and the turn. */
export function seedFor(seed, rolloutId, turn) {
  return createHash('sha256').update(`${seed}\n${rolloutId}\n${turn}`).digest().readUInt32BE(0) >>> 1;
}

/**
 * The tool call's answer: from the environment Rein serves when it gives one (REIN_ENV_URL, where
 * Rein may vary the tool's rules and output), else computed here, as in production.
 */
async function runTool(name, args) {
  const env = process.env.REIN_ENV_URL;
  if (!env) return String(calculate(args.x));
  const res = await fetch(`${env}/step`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tool: name, arguments: args }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error?.message ?? `environment answered ${res.status}`);
  return body.observation;
}

async function main() {
  const [taskFile, outputFile = process.env.REIN_OUTPUT_FILE] = process.argv.slice(2);
  const task = JSON.parse(
    taskFile ? readFileSync(taskFile, 'utf8') : (process.env.REIN_TASK ?? readFileSync(0, 'utf8')),
  );
  const client = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
  const messages = [{ role: 'user', content: task.question }];
  let answer = null;
  for (let turn = 0; turn < MAX_TURNS && answer === null; turn++) {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages,
      tools,
      temperature: TEMPERATURE,
      max_tokens: 48,
      ...(SEED !== undefined && { seed: seedFor(SEED, process.env.REIN_ROLLOUT_ID ?? '', turn) }),
    });
    const message = completion.choices[0].message;
    messages.push({
      role: 'assistant',
      content: message.content,
      ...(message.tool_calls?.length && { tool_calls: message.tool_calls }),
    });
    if (!message.tool_calls?.length) {
      answer = (message.content ?? '').trim();
      break;
    }
    for (const call of message.tool_calls) {
      let result;
      try {
        result = await runTool(call.function.name, JSON.parse(call.function.arguments));
      } catch (err) {
        result = `error: ${err.message}`;
      }
      messages.push({ role: 'tool', tool_call_id: call.id, content: result });
    }
  }
  const output = JSON.stringify({
    taskId: task.id,
    answer,
    turns: messages.filter((m) => m.role === 'assistant').length,
  });
  if (outputFile) writeFileSync(outputFile, `${output}\n`);
  else process.stdout.write(`${output}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    process.stderr.write(`harness: ${err.message}\n`);
    process.exit(1);
  });
}
