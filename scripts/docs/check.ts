/**
 * The docs check: over README.md and docs/**\/*.md, every relative link (the file exists; an
 * #anchor is a heading there), every `rein …` command and flag written as code (against the real
 * commander program), every config key named as code and every key of a YAML config example
 * (against the real zod schema), every `npm run` script, and every repository file named as code.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { configJsonSchema } from '../../src/config/schema.js';
import { allCommands, reinProgram } from './cli-reference.js';
import { checkCode } from './check-code.js';
import { schemaRows, type JsonSchema } from './json-schema.js';
import { anchorsOf, parseMarkdown, type MarkdownParts } from './markdown.js';
import { REPO_ROOT } from './references.js';

export interface DocProblem {
  /** Relative to the repository root. */
  file: string;
  line: number;
  message: string;
}

/** What the docs are checked against, read once. */
export interface DocsContext {
  root: string;
  program: Command;
  /** `policy serve` → its command. */
  commands: Map<string, Command>;
  /** Long and short flags every command takes (the program's own options, --help). */
  globalFlags: Set<string>;
  /** Every flag of any command. */
  allFlags: Set<string>;
  /**
   * Every key path of the config file, split into segments (`<name>` for a key you choose, `[]` for a list's items).
   */
  configPaths: string[][];
  topKeys: Set<string>;
  npmScripts: Set<string>;
  /** The repository's files (tracked, and untracked but not ignored), relative to the root. */
  files: string[];
  /** Their first path segments. */
  topDirs: Set<string>;
}

export async function docsContext(root = REPO_ROOT): Promise<DocsContext> {
  const program = await reinProgram();
  const commands = new Map(allCommands(program).map(({ name, command }) => [name, command]));
  const flagsOf = (command: Command) =>
    command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined));
  const globalFlags = new Set([...flagsOf(program), '--help', '-h']);
  const allFlags = new Set([...globalFlags, ...[...commands.values()].flatMap(flagsOf)]);
  const schema = configJsonSchema() as JsonSchema;
  const configPaths = configKeyPaths(schema);
  const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const files = repositoryFiles(root);
  return {
    root,
    program,
    commands,
    globalFlags,
    allFlags,
    configPaths,
    topKeys: new Set(Object.keys(schema.properties ?? {})),
    npmScripts: new Set(Object.keys(pkg.scripts)),
    files,
    topDirs: new Set(files.filter((f) => f.includes('/')).map((f) => f.split('/')[0] as string)),
  };
}

/** Every key path of a schema, a map's entries (`gateway.backends.<name>`) included. */
function configKeyPaths(schema: JsonSchema): string[][] {
  const paths = new Map<string, string[]>();
  const add = (segments: string[]) => paths.set(segments.join('.'), segments);
  for (const row of schemaRows(schema)) {
    const segments = splitKey(row.path);
    segments.forEach((_, n) => add(segments.slice(0, n + 1)));
    const entries =
      row.schema.additionalProperties ??
      row.schema.anyOf?.find((o) => typeof o.additionalProperties === 'object')?.additionalProperties;
    if (typeof entries === 'object') add([...segments, '<name>']);
  }
  return [...paths.values()];
}

/** `gateway.redact.rules[].regex` → gateway, redact, rules, [], regex. */
export function splitKey(key: string): string[] {
  return key.split('.').flatMap((segment) => {
    const bare = segment.replace(/\[\]$/, '');
    return bare === segment ? [segment] : [bare, '[]'];
  });
}

function repositoryFiles(root: string): string[] {
  try {
    const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    // Deleted but not yet staged files are still listed by git; the tree is what counts.
    return out.split('\n').filter((f) => f !== '' && existsSync(path.join(root, f)));
  } catch {
    return walk(root, '');
  }
}

function walk(root: string, dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules' || entry.name === 'dist') continue;
    const rel = dir ? `${dir}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...walk(root, rel));
    else out.push(rel);
  }
  return out;
}

/** The Markdown files the check covers: README.md and everything under docs/. */
export function docFiles(root = REPO_ROOT): string[] {
  const docs = existsSync(path.join(root, 'docs')) ? walk(root, 'docs').filter((f) => f.endsWith('.md')) : [];
  return ['README.md', ...docs.sort()];
}

/** Every problem in the docs, in file and line order. */
export async function checkDocs(context?: DocsContext, files?: readonly string[]): Promise<DocProblem[]> {
  const ctx = context ?? (await docsContext());
  const problems: DocProblem[] = [];
  for (const file of files ?? docFiles(ctx.root)) {
    const parts = parseMarkdown(readFileSync(path.join(ctx.root, file), 'utf8'));
    const report = (line: number, message: string) => problems.push({ file, line, message });
    checkLinks(ctx.root, file, parts, report);
    checkCode(ctx, file, parts, report);
  }
  return problems.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line);
}

export function formatProblem(p: DocProblem): string {
  return `${p.file}:${p.line}: ${p.message}`;
}

type Report = (line: number, message: string) => void;

const anchorCache = new Map<string, Set<string>>();

function anchorsIn(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (!anchors) {
    anchors = anchorsOf(readFileSync(file, 'utf8'));
    anchorCache.set(file, anchors);
  }
  return anchors;
}

function checkLinks(root: string, file: string, parts: MarkdownParts, report: Report): void {
  anchorCache.clear();
  const here = path.join(root, file);
  for (const { line, text } of parts.prose) {
    for (const match of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1] as string;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const [rawPath = '', anchor] = target.split('#', 2);
      const linkPath = decodeURIComponent(rawPath);
      const resolved = linkPath === '' ? here : path.resolve(path.dirname(here), linkPath);
      if (!resolved.startsWith(root)) {
        report(line, `link to ${target}: outside the repository`);
        continue;
      }
      if (!existsSync(resolved)) {
        report(line, `link to ${target}: no such file ${path.relative(root, resolved)}`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) {
        report(line, `link to ${target}: #${anchor} on a file that is not Markdown`);
        continue;
      }
      if (!anchorsIn(resolved).has(anchor)) {
        report(line, `link to ${target}: ${path.relative(root, resolved)} has no heading whose anchor is #${anchor}`);
      }
    }
  }
}
