#!/usr/bin/env node
// The calculator agent with OpenAI Agents JS (`@openai/agents`): an Agent with a function tool,
// run by `run`. Its documented way to a model server other than OpenAI's is a default client
// with that base URL; its default model API is the Responses API. Rein gives it only
// OPENAI_BASE_URL and OPENAI_API_KEY.   node openai-agents.mjs TASK.json OUTPUT.json
import { Agent, MaxTurnsExceededError, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { CALC_DESCRIPTION, MAX_TOKENS, MAX_TURNS, MODEL, calcTool, runTask } from './calculator.mjs';

setDefaultOpenAIClient(new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY }));
// Traces go to OpenAI's platform by default, with the same key: not a key it knows.
setTracingDisabled(true);

const calc = tool({
  name: 'calc',
  description: CALC_DESCRIPTION,
  parameters: z.object({ x: z.string() }),
  execute: async ({ x }) => calcTool(x),
});

// No `instructions` (they are optional): given them as a system message, the tiny embedded base
// wrote a malformed tool call on every task tried, so no tool loop ran. A real policy takes them.
const agent = new Agent({
  name: 'Calculator',
  model: MODEL,
  tools: [calc],
  modelSettings: { temperature: 0, maxTokens: MAX_TOKENS },
});

runTask(async (question) => {
  try {
    const result = await run(agent, question, { maxTurns: MAX_TURNS });
    return result.finalOutput?.trim();
  } catch (err) {
    // No final answer within the turn limit: the task is answered with nothing (reward 0).
    if (err instanceof MaxTurnsExceededError) return null;
    throw err;
  }
});
