// The calculator agent's world as an environment Rein may vary (docs/environments.md): the tool
// the harness calls answers from here when Rein serves it (REIN_ENV_URL), exactly as the
// harness's own `calculate` answers without Rein. Its state variant asks other questions of the
// same kinds (bigger operands, a third term, an irrelevant number), each with its answer, so the
// same verifier scores it.
import { calculate, tools } from './harness.mjs';

const KINDS = [
  { test: /times/, make: (a, b) => ({ question: `${a} times ${b}?`, answer: a * b }) },
  { test: /apples/, make: (a, b) => ({ question: `${a} apples and ${b} more?`, answer: a + b }) },
  { test: /minus/, make: (a, b) => ({ question: `${a} minus ${b}?`, answer: a - b }) },
  { test: /plus|.*/, make: (a, b) => ({ question: `${a} plus ${b}?`, answer: a + b }) },
];

/**
 * Another question of the task's kind: operands up to 99 × `scale`; `terms: 3` adds a third
 * operand; `distractor: true` adds a number the answer does not use.
 */
function vary(task, params, random) {
  const scale = Math.max(1, Math.min(1000, Number(params.scale ?? 1)));
  const int = () => 1 + Math.floor(random() * 99 * scale);
  const kind = KINDS.find((k) => k.test.test(String(task.question)));
  let { question, answer } = kind.make(int(), int());
  if (Number(params.terms ?? 2) >= 3) {
    const c = int();
    question = `${question.replace(/\?$/, '')}, plus ${c}?`;
    answer += c;
  }
  if (params.distractor) question = `${question} (Asked on day ${int()}.)`;
  return { ...task, question, answer };
}

export default {
  name: 'calculator',
  version: 'calculator-env-1',
  tools,
  reset: (task) => ({ state: { calls: 0 }, observation: String(task.question) }),
  step(state, action) {
    const next = { calls: state.calls + 1 };
    if (action.tool !== 'calc') return { state: next, observation: `error: no tool ${action.tool}`, done: false };
    try {
      return { state: next, observation: String(calculate(action.arguments.x)), done: false };
    } catch (err) {
      return { state: next, observation: `error: ${err.message}`, done: false };
    }
  },
  vary,
  // Other worlds the rigger may try when tasks fail every sample or runs give up.
  stateParams: [{ scale: 3 }, { distractor: true }, { scale: 10, terms: 3 }],
};
