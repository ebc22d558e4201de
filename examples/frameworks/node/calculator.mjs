// What every gallery agent shares and no framework provides: the task file in, the answer file
// out (the harness contract Rein runs it by: `node AGENT.mjs TASK.json OUTPUT.json`), and the
// calculator tool itself. The framework code lives in each agent's own file.
import { readFileSync, writeFileSync } from 'node:fs';

/** The model name the gateway serves (its alias for the policy in production). */
export const MODEL = process.env.AGENT_MODEL ?? 'production';
/** At most this many model calls per task. */
export const MAX_TURNS = 4;
/** Each reply is short: a tool call or the answer. */
export const MAX_TOKENS = 48;
export const CALC_DESCRIPTION = 'Evaluates an arithmetic expression with integers, + - * and parentheses.';

/** Integer arithmetic only, evaluated without eval: numbers, + - *, parentheses, unary minus. */
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

/** The tool's reply to the model: the value, or the error for the model to read. */
export function calcTool(x) {
  try {
    return String(calculate(x));
  } catch (err) {
    return `error: ${err.message}`;
  }
}

/**
 * Runs `agent(question)` on the task named on the command line and writes {"answer": ...} to the
 * output file; a failure exits non-zero with the reason on stderr.
 */
export function runTask(agent) {
  const [taskFile, outputFile] = process.argv.slice(2);
  if (!taskFile || !outputFile) {
    process.stderr.write('usage: node AGENT.mjs TASK.json OUTPUT.json\n');
    process.exit(2);
  }
  const task = JSON.parse(readFileSync(taskFile, 'utf8'));
  agent(task.question)
    .then((answer) => writeFileSync(outputFile, `${JSON.stringify({ taskId: task.id, answer: answer ?? null })}\n`))
    .catch((err) => {
      process.stderr.write(`agent: ${err.stack ?? err.message}\n`);
      process.exit(1);
    });
}
