#!/usr/bin/env node
// The calculator agent as Anthropic's tool-use docs teach it with `@anthropic-ai/sdk`:
// messages.create with tools; while the model stops for tool_use, run the tools and send their
// tool_result blocks back in a user turn. Rein gives it only ANTHROPIC_BASE_URL and
// ANTHROPIC_API_KEY (the client reads both).   node anthropic-tool-loop.mjs TASK.json OUTPUT.json
import Anthropic from '@anthropic-ai/sdk';
import { CALC_DESCRIPTION, MAX_TOKENS, MAX_TURNS, MODEL, calcTool, runTask } from './calculator.mjs';

const client = new Anthropic();
const tools = [
  {
    name: 'calc',
    description: CALC_DESCRIPTION,
    input_schema: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] },
  },
];

runTask(async (question) => {
  const messages = [{ role: 'user', content: question }];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const response = await client.messages.create({
      model: MODEL,
      max_tokens: MAX_TOKENS,
      temperature: 0,
      tools,
      messages,
    });
    messages.push({ role: 'assistant', content: response.content });
    if (response.stop_reason !== 'tool_use') {
      return response.content
        .filter((block) => block.type === 'text')
        .map((block) => block.text)
        .join('')
        .trim();
    }
    const results = response.content
      .filter((block) => block.type === 'tool_use')
      .map((use) => ({ type: 'tool_result', tool_use_id: use.id, content: calcTool(use.input.x) }));
    messages.push({ role: 'user', content: results });
  }
  return null;
});
