/** How a table fits a terminal: columns it can do without are left out, least needed first, until it fits. */
export interface TableFit {
  /** The terminal's width in columns (undefined: no limit, every column). */
  width: number | undefined;
  /** Indexes of the columns that may be left out, least needed first. */
  dropFirst: readonly number[];
  /** How to see the columns left out (a few words: the note must fit too). */
  more: string;
}

/**
 * Columns padded to their widest cell, two spaces apart: what the CLI's listings print, and the
 * shadow report's text. With a fit, columns are left out (in its order) while a line is wider than
 * the terminal, and a last line says which and how to see them.
 */
export function formatTable(header: readonly string[], rows: ReadonlyArray<readonly string[]>, fit?: TableFit): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  let kept = header.map((_, i) => i);
  const lineWidth = () => kept.reduce((n, i) => n + (widths[i] ?? 0), 0) + 2 * (kept.length - 1);
  const left: string[] = [];
  for (const i of fit?.dropFirst ?? []) {
    if (fit?.width === undefined || lineWidth() <= fit.width) break;
    kept = kept.filter((k) => k !== i);
    left.push(header[i] ?? '');
  }
  const line = (cells: readonly string[]) =>
    kept.map((i, n) => (n === kept.length - 1 ? (cells[i] ?? '') : (cells[i] ?? '').padEnd(widths[i] ?? 0))).join('  ');
  const table = [header, ...rows].map(line).join('\n');
  if (left.length === 0) return table;
  const what = left.length <= 3 ? left.join(', ') : `${left.length} columns`;
  return `${table}\n(${what}: left out for ${fit?.width} columns; ${fit?.more})`;
}

/** Words into lines of at most `width` characters (a longer word is cut). */
export function wrapText(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (current && current.length + 1 + word.length > width) {
      lines.push(current);
      current = '';
    }
    let rest = current ? `${current} ${word}` : word;
    while (rest.length > width) {
      lines.push(rest.slice(0, width));
      rest = rest.slice(width);
    }
    current = rest;
  }
  return [...lines, current];
}

/** A line of prose wrapped at `width` (none: as it is), its continuation lines indented two more than it. */
export function wrapLine(line: string, width: number | undefined): string[] {
  if (width === undefined || line.length <= width) return [line];
  const indent = /^ */.exec(line)?.[0] ?? '';
  const [first, ...rest] = wrapText(line.slice(indent.length), width - indent.length - 2);
  return [`${indent}${first ?? ''}`, ...rest.map((l) => `${indent}  ${l}`)];
}
