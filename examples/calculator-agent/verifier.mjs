#!/usr/bin/env node
// The example verifier: runs outside the harness with its own view of the task (the expected
// answer never reaches the harness) and prints reward components as JSON.
//
//   node verifier.mjs TASK_WITH_ANSWER.json HARNESS_OUTPUT.json
import { readFileSync } from 'node:fs';

export function verify(task, output) {
  const answer = output?.answer ?? null;
  const number = typeof answer === 'string' ? answer.match(/-?\d+/)?.[0] : undefined;
  const success = number !== undefined && Number(number) === task.answer ? 1 : 0;
  return {
    components: {
      success,
      // Answering at all, with a number, is the format the task asks for.
      format: number !== undefined ? 1 : 0,
    },
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [taskFile, outputFile] = process.argv.slice(2);
  const task = JSON.parse(readFileSync(taskFile, 'utf8'));
  let output = null;
  try {
    output = JSON.parse(readFileSync(outputFile, 'utf8'));
  } catch {
    // A harness that wrote nothing gets no success.
  }
  process.stdout.write(`${JSON.stringify(verify(task, output))}\n`);
}
