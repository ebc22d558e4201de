/** The docs check's look at code: commands and flags, config keys, npm scripts and file names. */
import YAML from 'yaml';
import type { DocsContext } from './check.js';
import { splitKey } from './check.js';
import type { Located, MarkdownParts } from './markdown.js';

type Report = (line: number, message: string) => void;

export function checkCode(ctx: DocsContext, _file: string, parts: MarkdownParts, report: Report): void {
  for (const span of parts.spans) {
    checkCommands(ctx, span, false, report);
    checkNpmScripts(ctx, span, report);
    checkLoneFlag(ctx, span, report);
    checkConfigKey(ctx, span, report);
    checkFileName(ctx, span, report);
  }
  for (const blockLine of parts.blockLines) {
    // JSON is data; a `text` block is prose laid out (a file tree), not commands.
    if (blockLine.lang === 'json' || blockLine.lang === 'text') continue;
    checkCommands(ctx, blockLine, true, report);
    checkNpmScripts(ctx, blockLine, report);
  }
  for (const block of parts.blocks) {
    if (block.lang === 'yaml' || block.lang === 'yml') checkYamlConfig(ctx, block, report);
  }
}

/** Where `rein` is invoked: `rein`, `./bin/rein.js`, `npx rein`. */
const INVOCATION = /(?:^|[\s`(=])(?:\.\/)?(?:bin\/rein\.js|rein)(?=\s+\S)/g;

/** A `rein …` command line: the command exists, and each flag is one of its options or a global one. */
function checkCommands(ctx: DocsContext, { line, text }: Located, inBlock: boolean, report: Report): void {
  for (const match of text.matchAll(INVOCATION)) {
    let rest = text.slice((match.index ?? 0) + match[0].length);
    // In a shell block a comment, a pipe or a next command ends it; in a span only the span does.
    if (inBlock) rest = rest.split(/\s#|;|&&|\|\||\s\|\s|`/)[0] as string;
    const tokens = rest
      .trim()
      .split(/\s+/)
      .filter((t) => t !== '');
    checkInvocation(ctx, tokens, line, report);
  }
}

function checkInvocation(ctx: DocsContext, tokens: readonly string[], line: number, report: Report): void {
  let i = 0;
  // Global options before the command.
  while (i < tokens.length && (tokens[i] as string).startsWith('-')) {
    const flag = bareFlag(tokens[i] as string);
    if (!ctx.globalFlags.has(flag)) {
      report(line, `rein ${flag}: not an option of rein (global options: ${[...ctx.globalFlags].join(', ')})`);
      return;
    }
    i += flag === '--config' || flag === '-c' ? (tokens[i]?.includes('=') ? 1 : 2) : 1;
  }
  const first = tokens[i];
  if (first === undefined || !/^[a-z][a-z-]*$/.test(first)) return; // `rein --help`, `rein COMMAND …`
  let name = first;
  let command = ctx.commands.get(name);
  if (!command) {
    report(line, `rein ${first}: no such command (see docs/reference/cli.md)`);
    return;
  }
  for (i++; i < tokens.length && command.commands.length > 0; i++) {
    const word = tokens[i] as string;
    const sub = ctx.commands.get(`${name} ${word}`);
    if (sub) {
      name = `${name} ${word}`;
      command = sub;
      continue;
    }
    if (/^[a-z][a-z-]*$/.test(word))
      report(
        line,
        `rein ${name} ${word}: rein ${name} has no subcommand ${word} (it has: ${command.commands.map((c) => c.name()).join(', ')})`,
      );
    break;
  }
  const own = new Set(command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined)));
  for (const token of tokens.slice(i)) {
    const flag = bareFlag(token.replace(/^[([]+/, ''));
    if (!/^--?[a-z]/i.test(flag)) continue;
    if (!own.has(flag) && !ctx.globalFlags.has(flag))
      report(line, `rein ${name} ${flag}: not an option of rein ${name} (see docs/reference/cli.md)`);
  }
}

/** `--flag=value,` → `--flag`. */
function bareFlag(token: string): string {
  return token.split('=')[0]!.replace(/[)\]},.;:]+$/, '');
}

/** A span that is only a flag (`--follow`, `--heldout N`) names an option of some rein command. */
function checkLoneFlag(ctx: DocsContext, { line, text }: Located, report: Report): void {
  const flag = /^(--[a-z][a-z0-9-]*)(?:[ =]\S+)?$/.exec(text)?.[1];
  if (flag && !ctx.allFlags.has(flag))
    report(line, `${flag}: no rein command has this option (write another tool's flag with the tool's name)`);
}

function checkNpmScripts(ctx: DocsContext, { line, text }: Located, report: Report): void {
  for (const match of text.matchAll(/\bnpm run ([\w:.*-]+)/g)) {
    const script = match[1] as string;
    const pattern = new RegExp(`^${script.split('*').map(escapeRegex).join('.*')}$`);
    if (![...ctx.npmScripts].some((s) => pattern.test(s)))
      report(line, `npm run ${script}: package.json has no script ${script}`);
  }
}

const FILE_EXTENSIONS = /\.(ts|mts|js|mjs|cjs|md|json|ya?ml|py|sh|sqlite|log|lock|txt|png|toml|cfg|html|css)$/;

/** A span naming a config key (`gateway.publicUrl`, `trainer.kubernetes.namespace: x`) names one the schema has. */
function checkConfigKey(ctx: DocsContext, { line, text }: Located, report: Report): void {
  const key = /^([a-z][A-Za-z0-9]*(?:\.(?:[A-Za-z0-9_<>*-]+(?:\[\])?))+)(?::(?:\s.*)?|\s*=.*)?$/.exec(text)?.[1];
  if (!key || !ctx.topKeys.has(key.split('.')[0] as string) || FILE_EXTENSIONS.test(key) || /\(/.test(key)) return;
  if (!knownKey(ctx, splitKey(key)))
    report(line, `${key}: not a key of the config file (see docs/reference/config.md)`);
}

function knownKey(ctx: DocsContext, segments: readonly string[]): boolean {
  return ctx.configPaths.some(
    (known) =>
      known.length === segments.length &&
      known.every((k, j) => {
        const s = segments[j] as string;
        return k === s || s === '*' || (k === '<name>' && s !== '[]') || (/^<.*>$/.test(s) && k === '<name>');
      }),
  );
}

/** A YAML example whose top-level keys are all config sections: every key in it is one the schema has. */
function checkYamlConfig(ctx: DocsContext, block: Located, report: Report): void {
  let value: unknown;
  try {
    value = YAML.parse(block.text);
  } catch {
    return; // An excerpt with placeholders; not a config file.
  }
  if (!isMapping(value) || Object.keys(value).length === 0 || !Object.keys(value).every((k) => ctx.topKeys.has(k)))
    return;
  const visit = (node: unknown, segments: string[]) => {
    if (segments.length > 0 && !knownKey(ctx, segments)) {
      const lineOf = block.text
        .split('\n')
        .findIndex((l) => new RegExp(`^\\s*-?\\s*${escapeRegex(segments.at(-1) as string)}\\s*:`).test(l));
      report(
        block.line + Math.max(0, lineOf),
        `${segments.join('.').replace(/\.\[\]/g, '[]')}: not a key of the config file (see docs/reference/config.md)`,
      );
      return;
    }
    if (isMapping(node)) for (const [k, v] of Object.entries(node)) visit(v, [...segments, k]);
    else if (Array.isArray(node))
      for (const item of node)
        if (isMapping(item) && knownKey(ctx, [...segments, '[]'])) visit(item, [...segments, '[]']);
  };
  visit(value, []);
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * A span naming a repository file (`src/gate/gate.ts`, `faults.test.ts`, `test/integration/*-metrics.test.ts`) names
 * one that exists.
 */
function checkFileName(ctx: DocsContext, { line, text }: Located, report: Report): void {
  if (!/^[\w.@*-]+(\/[\w.@*-]+)*\/?$/.test(text) || /^\.|\.\.|^\*/.test(text)) return;
  const source = /\.(ts|mts|mjs|cjs|py|sh|md)$/.test(text);
  if (!source && !ctx.topDirs.has(text.split('/')[0] as string)) return;
  const pattern = new RegExp(
    `(^|/)${text.replace(/\/$/, '').split('*').map(escapeRegex).join('[^/]*')}${text.endsWith('/') || !FILE_EXTENSIONS.test(text) ? '(/|$)' : '$'}`,
  );
  // A name with a folder is the repository's path from the root or from some folder in it
  // (`kubernetes/job-executor.ts`).
  if (!ctx.files.some((f) => pattern.test(f))) report(line, `${text}: no such file or folder in the repository`);
}
