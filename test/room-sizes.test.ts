import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Small rooms: no function over ~80 lines, no file over ~400 (tests and fixtures aside), so a
 * newcomer can read any piece in one sitting. Something that grows past the line is split by what
 * it does, not let through.
 */

const root = path.resolve(import.meta.dirname, '..');
const SCANNED = ['src', 'workflows', 'activities', 'workers', 'bench', 'scripts', 'test/helpers'];
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

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
  it(`no file over ${MAX_FILE_LINES} lines and no function over ${MAX_FUNCTION_LINES}`, () => {
    const over = [...oversized()].map(([key, lines]) => `${key}: ${lines} lines`);
    expect(over, 'split these by what they do (see docs/architecture.md)').toEqual([]);
  });
});
