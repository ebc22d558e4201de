import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Small rooms: no function over ~80 lines, no file over ~400 (tests and fixtures aside), so a
 * newcomer can read any piece in one sitting. What is over the line today is listed below with its
 * size now, as a ceiling: it may shrink (then lower or remove its entry), never grow, and nothing
 * new may join it.
 */

const root = path.resolve(import.meta.dirname, '..');
const SCANNED = ['src', 'workflows', 'activities', 'workers', 'bench', 'scripts', 'test/helpers'];
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

/** `file` or `file#function` → its lines today. Shrink these; when under the limit, delete the entry. */
const OVER_TODAY: Readonly<Record<string, number>> = {
  'src/store/journal-store.ts': 490,
  'src/store/journal-rows.ts': 447,
  'src/telemetry/gateway-tracing.ts': 431,
  'src/samples/batch.ts': 416,
  'src/console/web/pages/run.ts#render': 122,
  'src/console/web/pages/rollout.ts#rolloutPage': 120,
  'test/helpers/vllm-like/chat-completions.ts#chatCompletions': 116,
  'src/policy/local-trainer.ts#trainOnce': 103,
  'src/api/routes/policies.ts#policyRoutes': 95,
  'src/client/continue-run.ts#continueRun': 91,
  'src/api/routes/runs.ts#runRoutes': 90,
  'src/console/web/pages/decision.ts#decisionPage': 90,
  'src/console/web/pages/releases.ts#releasesPage': 87,
  'src/gateway/proxy.ts#forward': 85,
  'src/cli/run-format.ts#formatRunSummary': 84,
  'bench/gateway.ts#postgresJournal': 81,
  'test/helpers/node-agent/container-command.ts#containerCommand': 81,
};

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(relative);
    return /\.(ts|mts)$/.test(entry.name) && !entry.name.endsWith('.d.ts') && !entry.name.includes('.test.')
      ? [relative]
      : [];
  });
}

/** A function's name as a reader finds it: its own, its variable's, its property's, or its caller's. */
function nameOf(node: ts.Node): string {
  const named = node as { name?: ts.Node };
  if (named.name && ts.isIdentifier(named.name)) return named.name.text;
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    if (ts.isIdentifier(parent.name)) return parent.name.text;
  }
  if (ts.isCallExpression(parent) && ts.isPropertyAccessExpression(parent.expression))
    return `${parent.expression.name.text}(…)`;
  return '(anonymous)';
}

/** Every file over the file limit and every function over the function limit, with its lines. */
function oversized(): Map<string, number> {
  const found = new Map<string, number>();
  for (const file of SCANNED.flatMap(sourceFiles)) {
    const text = readFileSync(path.join(root, file), 'utf8');
    const lines = text.split('\n').length;
    if (lines > MAX_FILE_LINES) found.set(file, lines);
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const key = `${file}#${nameOf(node)}`;
        if (end - start + 1 > MAX_FUNCTION_LINES) found.set(key, Math.max(found.get(key) ?? 0, end - start + 1));
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

describe('small rooms', () => {
  const found = oversized();

  it(`no new file over ${MAX_FILE_LINES} lines and no new function over ${MAX_FUNCTION_LINES}`, () => {
    const newcomers = [...found]
      .filter(([key]) => OVER_TODAY[key] === undefined)
      .map(([key, lines]) => `${key}: ${lines} lines`);
    expect(newcomers, 'split these by concern (see docs/architecture.md)').toEqual([]);
  });

  it('what is over the line today only shrinks, and leaves the list once it fits', () => {
    const grown = Object.entries(OVER_TODAY)
      .filter(([key, ceiling]) => (found.get(key) ?? 0) > ceiling)
      .map(([key, ceiling]) => `${key}: ${found.get(key)} lines, was ${ceiling}`);
    const fits = Object.keys(OVER_TODAY).filter((key) => !found.has(key));
    expect(grown, 'these grew: split them instead').toEqual([]);
    expect(fits, 'these fit now: remove their entries from OVER_TODAY').toEqual([]);
  });
});
