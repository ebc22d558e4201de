#!/usr/bin/env node
// The example verifier: runs outside the harness with its own view of the task (the expected
// answer never reaches the harness) and prints reward components as JSON.
//
//   node verifier.mjs TASK_WITH_ANSWER.json HARNESS_OUTPUT.json
//
// The answers are numbers, so an answer succeeds when the numbers it contains are exactly the
// expected one: "45", "45 seconds" and "timeout_seconds = 45" succeed; "45 or 60" does not, so
// hedging between the right file and a decoy earns nothing.
import { readFileSync } from 'node:fs';

/** Whitespace and case folded, surrounding quotes and a final full stop dropped. */
const normalize = (text) =>
  String(text)
    .trim()
    .replace(/^["'`]+|["'`]+$/g, '')
    .replace(/\.$/, '')
    .replace(/\s+/g, ' ')
    .toLowerCase();

export function verify(task, output) {
  const answer = typeof output?.answer === 'string' ? normalize(output.answer) : '';
  const expected = normalize(task.answer);
  const numbers = [...new Set(answer.match(/-?\d+(?:\.\d+)?/g) ?? [])];
  const success = answer === expected || (numbers.length === 1 && Number(numbers[0]) === Number(expected)) ? 1 : 0;
  return {
    components: {
      success,
      // A short answer holding one value is the format the question asks for.
      format: numbers.length === 1 && answer.length <= 80 ? 1 : 0,
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
