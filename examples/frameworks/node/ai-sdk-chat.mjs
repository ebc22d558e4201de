#!/usr/bin/env node
// The calculator agent with the AI SDK v6 on the Chat Completions API (`openai.chat(...)`):
// generateText with a tool, stopped after a few steps. Rein gives it only OPENAI_BASE_URL and
// OPENAI_API_KEY.   node ai-sdk-chat.mjs TASK.json OUTPUT.json
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { CALC_DESCRIPTION, MAX_TOKENS, MAX_TURNS, MODEL, calcTool, runTask } from './calculator.mjs';

const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });

runTask(async (question) => {
  const { text } = await generateText({
    model: openai.chat(MODEL),
    tools: {
      calc: tool({
        description: CALC_DESCRIPTION,
        inputSchema: z.object({ x: z.string() }),
        execute: async ({ x }) => calcTool(x),
      }),
    },
    stopWhen: stepCountIs(MAX_TURNS),
    temperature: 0,
    maxOutputTokens: MAX_TOKENS,
    prompt: question,
  });
  return text.trim();
});
