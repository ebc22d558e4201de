// The files example's environment (Rein's reset/step contract, src/environments/contract.ts): a
// read-only virtual tree of service configurations, carried by the task (`task.files`), that the
// agent explores with list_dir, read_file and search until it can answer the task's question.
//
// - reset(task): the question is the first observation; the state is the tree ({files}), plain JSON.
// - step(state, action): the tool's text answer. The tree never changes, so the state is returned
//   as it came. `done` is always false: the episode ends when the agent answers in plain text,
//   which the verifier scores; no tool call can tell whether the agent is finished.
// - vary(task, params, random): the same question in another world: more services, deeper
//   nesting, decoy files or long files, with `answer` (the hidden field) set to the new value.
import { buildWorld, parseQuestion, SHAPE_LIMITS, shapeOf } from './world.mjs';
import { runTool, toolSpecs } from './tools.mjs';

function filesOf(task) {
  const files = task?.files;
  const valid =
    files !== null &&
    typeof files === 'object' &&
    !Array.isArray(files) &&
    Object.entries(files).every(([p, text]) => p.startsWith('/') && typeof text === 'string');
  if (!valid)
    throw new Error(
      `files environment: task ${JSON.stringify(task?.id)} needs "files", an object from absolute paths to text; ` +
        'generate tasks with examples/files-agent/tasks.mjs',
    );
  return files;
}

function reset(task) {
  const files = filesOf(task);
  if (typeof task.question !== 'string')
    throw new Error(`files environment: task ${JSON.stringify(task.id)} needs a "question" string`);
  return { state: { files }, observation: task.question };
}

function step(state, action) {
  const observation = runTool(state.files, action?.tool, action?.arguments);
  return { state, observation, done: false };
}

/** vary's parameters, checked: an unknown or out-of-range one is a config mistake, named with its fix. */
function checkedShape(params, current) {
  const shape = { ...current };
  for (const [name, value] of Object.entries(params ?? {})) {
    if (name === 'longFiles') {
      if (typeof value !== 'boolean') throw new Error('files vary: "longFiles" must be true or false');
      shape.longFiles = value;
      continue;
    }
    const limits = SHAPE_LIMITS[name];
    if (!limits)
      throw new Error(`files vary: unknown parameter "${name}"; it varies services, depth, distractors and longFiles`);
    if (!Number.isInteger(value) || value < limits.min || value > limits.max)
      throw new Error(`files vary: "${name}" must be an integer from ${limits.min} to ${limits.max}, not ${value}`);
    shape[name] = value;
  }
  return shape;
}

/**
 * The same question in a new world built from `random`: the parameters given change the world's
 * shape, the others keep the task's own (read back from its files), and `answer` is the new value.
 */
function vary(task, params, random) {
  const target = parseQuestion(task.question);
  if (!target) throw new Error(`files vary: task ${JSON.stringify(task.id)} does not ask a question tasks.mjs writes`);
  const shape = checkedShape(params, shapeOf(filesOf(task)));
  const { files, answer } = buildWorld(random, target, shape);
  return { ...task, files, answer };
}

export default { name: 'files', version: 'files-env-1', tools: toolSpecs, reset, step, vary };
