// Grounded tool calls, the harness's mode for models too small to spell a path (AGENT_GROUNDED=1,
// as examples/files-agent/embedded.yaml runs the embedded policy). The model still chooses every
// call, but each turn must be a call (`tool_choice: "required"`) and its arguments are limited,
// through the tools' JSON schemas (`enum`, enforced by constrained decoding on vLLM and on Rein's
// embedded server), to what the agent has seen: folders and files the tools named, words of the
// question to search for, and, through the agent's own `answer` tool, the values it has read.
// Nothing here knows the answer or where it is: a wrong choice costs a turn, as it would a bigger
// model. Without AGENT_GROUNDED the harness offers the environment's tools as they are.

const WORD = /[a-z]{3,}/g;
const VALUE = /=\s*(-?\d+)/g;
const SEARCH_HIT = /^(\/[^:\s]*):\d+:/gm;

/** The agent's own tool: it ends the episode with one of the values it has read. */
const ANSWER_TOOL = 'answer';

const oneOf = (name, values) => ({
  type: 'object',
  properties: { [name]: { type: 'string', enum: values } },
  required: [name],
  additionalProperties: false,
});

const tool = (spec, parameters) => ({
  type: 'function',
  function: { name: spec.function.name, description: spec.function.description, parameters, strict: true },
});

/** What the agent has seen in a task, and the tools it may call next. */
export function groundedAgent(question) {
  const dirs = new Set(['/']);
  const files = new Set();
  const words = new Set(String(question).toLowerCase().match(WORD) ?? []);
  const values = new Set();
  const used = new Set();
  const fresh = (kind, items) => [...items].filter((item) => !used.has(`${kind}\n${item}`));
  const choices = { list_dir: () => fresh('list_dir', dirs), read_file: () => fresh('read_file', files) };
  choices.search = () => fresh('search', words);

  return {
    /** The environment's tools with their arguments limited to what is fresh, and `answer` once a value was read. */
    tools(specs) {
      const offered = specs.flatMap((spec) => {
        const options = choices[spec.function.name]?.() ?? [];
        const argument = spec.function.name === 'search' ? 'pattern' : 'path';
        return options.length ? [tool(spec, oneOf(argument, options))] : [];
      });
      if (values.size === 0) return offered;
      const answer = { function: { name: ANSWER_TOOL, description: 'Replies with the value asked for.' } };
      return [...offered, tool(answer, oneOf('value', [...values]))];
    },
    /** The answer when `call` is the agent's `answer`, else null. */
    answerOf(name, args) {
      return name === ANSWER_TOOL && typeof args?.value === 'string' ? args.value : null;
    },
    /** Learns from a tool's observation: new paths, values, and that this call was made. */
    learn(name, args, observation) {
      const text = String(observation);
      used.add(`${name}\n${name === 'search' ? args?.pattern : args?.path}`);
      if (text.startsWith('error:')) return;
      if (name === 'list_dir') learnListing(args.path, text, dirs, files);
      for (const [, path] of name === 'search' ? text.matchAll(SEARCH_HIT) : []) files.add(path);
      if (name !== 'list_dir') for (const [, value] of text.matchAll(VALUE)) values.add(value);
    },
  };
}

/** A listing's entries as paths: folders end with /. */
function learnListing(dir, text, dirs, files) {
  const prefix = dir === '/' ? '/' : `${String(dir).replace(/\/+$/, '')}/`;
  for (const entry of text.split('\n')) {
    const name = entry.trim();
    if (!/^[\w.-]+\/?$/.test(name)) continue;
    if (name.endsWith('/')) dirs.add(`${prefix}${name.slice(0, -1)}`);
    else files.add(`${prefix}${name}`);
  }
}

export { ANSWER_TOOL };
