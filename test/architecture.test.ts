import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layering the folders show, checked on the import graph of Rein's own modules (relative
 * imports of every kind: value, type, re-export, dynamic), as the TypeScript compiler reads them.
 */

const root = path.resolve(import.meta.dirname, '..');
const SCANNED = ['src', 'workflows', 'activities', 'workers'];

/**
 * The folders that are ways in (the command line, the HTTP API, the console, the Temporal client): the domain calls
 * none of them.
 */
const INTERFACES = ['src/cli', 'src/api', 'src/console', 'src/client'];

/**
 * Cycles someone is breaking right now, so that this test stays green while they work and still
 * fails on any other cycle: an entry is a cycle's modules, exactly, with a comment saying who is
 * on it. Remove the entry when the cycle is gone. Empty since policy-update <-> kubernetes-trainer
 * (f7728f6) and release-candidate <-> training-iteration (587fa00) were broken.
 */
const KNOWN_CYCLES: readonly (readonly string[])[] = [];

type Graph = Map<string, string[]>;

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const relative = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') files.push(...sourceFiles(relative));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') && !entry.name.includes('.test.')) {
      files.push(relative);
    }
  }
  return files;
}

/** The module a relative specifier names: `./x.js` is the source file `./x.ts`. */
function resolve(from: string, specifier: string, modules: ReadonlySet<string>): string | undefined {
  const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  return [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, `${base}/index.ts`].find((candidate) =>
    modules.has(candidate),
  );
}

function importGraph(): Graph {
  const files = SCANNED.flatMap(sourceFiles);
  const modules = new Set(files);
  const graph: Graph = new Map();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(path.join(root, file), 'utf8'), true, true);
    const targets = importedFiles
      .filter(({ fileName }) => fileName.startsWith('.'))
      .map(({ fileName }) => resolve(file, fileName, modules))
      .filter((target): target is string => target !== undefined && target !== file);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Strongly connected components of more than one module (Tarjan's algorithm), each sorted. */
function cycles(graph: Graph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

const known = (cycle: readonly string[]): boolean =>
  KNOWN_CYCLES.some(
    (entry) => entry.length === cycle.length && [...entry].sort().every((file, i) => file === cycle[i]),
  );

const inFolder = (file: string, folder: string): boolean => file.startsWith(`${folder}/`);
const isInterface = (file: string): boolean => INTERFACES.some((folder) => inFolder(file, folder));

/** Imports of an interface module by a module of src/ that is not one. */
function interfaceImports(graph: Graph): string[] {
  const crossings: string[] = [];
  for (const [file, targets] of graph) {
    if (!inFolder(file, 'src') || isInterface(file)) continue;
    for (const target of targets.filter(isInterface)) crossings.push(`${file} imports ${target}`);
  }
  return crossings;
}

describe('the import graph', () => {
  const graph = importGraph();

  it('reads the modules and their imports', () => {
    // A guard for the checks below: an empty graph would pass them.
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('src/cli/main.ts')).toContain('src/config/load.ts');
  });

  it('has no import cycles', () => {
    const unexpected = cycles(graph).filter((cycle) => !known(cycle));
    // Each module of a cycle with what it imports inside the cycle: where to cut.
    const described = unexpected.map(
      (cycle) =>
        `import cycle: ${cycle
          .map(
            (file) =>
              `${file} (imports ${graph
                .get(file)!
                .filter((target) => cycle.includes(target))
                .join(', ')})`,
          )
          .join('; ')}`,
    );
    expect(described).toEqual([]);
  });

  it('keeps the domain from importing the interfaces', () => {
    expect(interfaceImports(graph)).toEqual([]);
  });
});

describe('the checks', () => {
  // What the checks above would report, on graphs small enough to read.
  it('find a cycle, and only the modules on it', () => {
    const graph: Graph = new Map([
      ['src/a.ts', ['src/b.ts']],
      ['src/b.ts', ['src/c.ts', 'src/d.ts']],
      ['src/c.ts', ['src/a.ts']],
      ['src/d.ts', []],
    ]);
    expect(cycles(graph)).toEqual([['src/a.ts', 'src/b.ts', 'src/c.ts']]);
  });

  it('find a domain module importing an interface, and let interfaces import each other', () => {
    const graph: Graph = new Map([
      ['src/shadow/report.ts', ['src/cli/table.ts']],
      ['src/cli/main.ts', ['src/client/runs.ts', 'src/shadow/report.ts']],
      ['workers/main.ts', ['src/client/runs.ts']],
    ]);
    expect(interfaceImports(graph)).toEqual(['src/shadow/report.ts imports src/cli/table.ts']);
  });
});
