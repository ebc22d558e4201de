import { readFileSync, statSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { ConfigError } from './config-error.js';
import { MAX_CONFIG_DEPTH, valueProblems } from './value-limits.js';

/** The largest config file read: a config is small, a larger file is likely the wrong one. */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** A config file's settings as written: read, decoded, parsed (YAML or JSON) and checked for size and depth. */
export function readConfigFile(file: string): Record<string, unknown> {
  const size = statSync(file).size;
  if (size > MAX_CONFIG_BYTES) {
    throw new ConfigError(file, [
      `the file is ${size} bytes, larger than 1 MiB: a config file is small, so this is likely the wrong file`,
    ]);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(readFileSync(file));
  } catch {
    throw new ConfigError(file, ['not valid UTF-8; save the file as UTF-8']);
  }
  const value = file.endsWith('.json') ? parseJson(file, text) : parseYaml(file, text);
  if (value === undefined || (value === null && !file.endsWith('.json'))) return {}; // an empty YAML file: all defaults
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(file, [
      `(top level): got ${JSON.stringify(value)}; expected a mapping of settings (e.g. "dataDir: .rein"), not a list or a single value`,
    ]);
  }
  // Checked here, before merging and cloning walk the value recursively.
  const problems = valueProblems(value);
  if (problems.length > 0) throw new ConfigError(file, problems);
  return value as Record<string, unknown>;
}

function parseJson(file: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ConfigError(file, [`not valid JSON: ${(err as Error).message}`]);
  }
}

function parseYaml(file: string, text: string): unknown {
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((e) => {
        const at = e.linePos ? ` (line ${e.linePos[0].line}, column ${e.linePos[0].col})` : '';
        // The yaml package's name for a collection it could not build: the stack ran out on the nesting.
        if (e.code === 'RESOURCE_EXHAUSTION')
          return `nested more than ${MAX_CONFIG_DEPTH} levels deep${at}; a config's settings nest a few levels at most`;
        return `not valid YAML: ${e.message.split('\n')[0]}`;
      }),
    );
  }
  // A tag the YAML library cannot resolve (!!js/function, !custom) would be read as a plain string:
  // a config is data, so say so rather than run with the tag silently dropped.
  const unresolved = doc.warnings.filter((w) => w.code === 'TAG_RESOLVE_FAILED');
  if (unresolved.length > 0)
    throw new ConfigError(
      file,
      unresolved.map(
        (w) =>
          `${(w.message.split('\n')[0] ?? '').replace(/:$/, '')}: a config holds plain YAML data (strings, numbers, lists, maps); remove the tag`,
      ),
    );
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_USES });
  } catch (err) {
    // toJS throws a ReferenceError past maxAliasCount: aliases expanding into aliases (a "billion laughs").
    throw new ConfigError(file, [
      `not usable YAML: ${(err as Error).message}; a config may use aliases (*name) ${MAX_ALIAS_USES} times at most`,
    ]);
  }
}

/** The yaml package's own default, named: a hand-written config never comes near it. */
const MAX_ALIAS_USES = 100;
