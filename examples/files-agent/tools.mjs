// The tools of the files example, over a virtual tree (a map from absolute path to text). They are
// pure functions of the tree and the arguments, shared by environment.mjs (what Rein serves) and
// harness.mjs (what the agent runs itself without Rein), so both give the same answers. Bad input
// from the model is answered with `error: …` text that says what to do instead; nothing throws.

const MAX_MATCHES = 40;
const MAX_PATTERN = 200;

export const toolSpecs = [
  {
    type: 'function',
    function: {
      name: 'list_dir',
      description: 'Lists a directory of the read-only file tree: one entry a line, folders end with /.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string', description: 'An absolute path such as / or /services' } },
        required: ['path'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Returns the text of a file.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'search',
      description:
        'Finds lines containing a text (case-insensitive, not a regular expression) in the files under a path; ' +
        'answers path:line: text.',
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string' },
          path: { type: 'string', description: 'A folder or file to search in (default /)' },
        },
        required: ['pattern'],
      },
    },
  },
];

/** An absolute path without . and .. segments or a trailing slash, or null when `value` is not a path. */
export function normalizePath(value) {
  if (typeof value !== 'string' || value.trim() === '' || value.length > 1000) return null;
  const segments = [];
  for (const segment of value.trim().split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

const isDirectory = (files, dir) => dir === '/' || Object.keys(files).some((p) => p.startsWith(`${dir}/`));
const under = (files, dir) => Object.keys(files).filter((p) => dir === '/' || p.startsWith(`${dir}/`));

/** The path argument, or the error text that explains what was wrong with it. */
function pathArgument(args, tool) {
  const path = normalizePath(args.path);
  return path ?? `error: ${tool} needs {"path": "/some/absolute/path"} (a non-empty string)`;
}

function listDir(files, args) {
  const dir = pathArgument(args, 'list_dir');
  if (dir.startsWith('error:')) return dir;
  if (dir in files) return `error: ${dir} is a file; read it with read_file`;
  if (!isDirectory(files, dir)) return `error: no such directory: ${dir}; list its parent to see what exists`;
  const prefix = dir === '/' ? '/' : `${dir}/`;
  const entries = new Set(
    under(files, dir).map((p) => {
      const rest = p.slice(prefix.length);
      const slash = rest.indexOf('/');
      return slash === -1 ? rest : `${rest.slice(0, slash)}/`;
    }),
  );
  return [...entries].sort().join('\n');
}

function readFile(files, args) {
  const file = pathArgument(args, 'read_file');
  if (file.startsWith('error:')) return file;
  if (file in files) return files[file];
  if (isDirectory(files, file)) return `error: ${file} is a directory; list it with list_dir`;
  return `error: no such file: ${file}; list its folder to see what exists`;
}

function search(files, args) {
  const { pattern } = args;
  if (typeof pattern !== 'string' || pattern.trim() === '' || pattern.length > MAX_PATTERN)
    return `error: search needs {"pattern": "some text"} (a non-empty string of at most ${MAX_PATTERN} characters)`;
  const scope = args.path === undefined ? '/' : normalizePath(args.path);
  if (scope === null) return 'error: "path", when given, must be a folder or file such as /services';
  const paths = scope in files ? [scope] : isDirectory(files, scope) ? under(files, scope).sort() : null;
  if (paths === null) return `error: no such folder or file: ${scope}`;
  const needle = pattern.toLowerCase();
  const matches = paths.flatMap((p) =>
    files[p]
      .split('\n')
      .map((line, i) => ({ line, i }))
      .filter(({ line }) => line.toLowerCase().includes(needle))
      .map(({ line, i }) => `${p}:${i + 1}: ${line}`),
  );
  if (matches.length === 0) return `no lines contain "${pattern}" under ${scope}`;
  const shown = matches.slice(0, MAX_MATCHES);
  if (matches.length > MAX_MATCHES)
    shown.push(`(${matches.length - MAX_MATCHES} more matches; narrow the pattern or the path)`);
  return shown.join('\n');
}

const TOOLS = { list_dir: listDir, read_file: readFile, search };

/** One tool call's observation. `args` is the parsed arguments object as the model gave it. */
export function runTool(files, tool, args) {
  const run = Object.hasOwn(TOOLS, tool) ? TOOLS[tool] : undefined;
  if (!run) return `error: unknown tool ${JSON.stringify(tool)}; the tools are ${Object.keys(TOOLS).join(', ')}`;
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    return `error: the arguments of ${tool} must be a JSON object`;
  return run(files, args);
}
