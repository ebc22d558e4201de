/** What the generators and the docs check share about Markdown: headings and their anchors. */

/** GitHub's anchor for a heading's text (github-slugger): lower case, punctuation dropped, each space a hyphen. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-');
}

/** The anchors a Markdown file's headings make, duplicates numbered as GitHub numbers them. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const marker = /^\s{0,3}(```|~~~)/.exec(line)?.[1];
    if (marker && (fence === undefined || fence === marker)) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = slug(heading);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** A piece of a Markdown file with the line (1-based) it starts on. */
export interface Located {
  line: number;
  text: string;
}

export interface MarkdownParts {
  /** Inline code spans, outside fenced blocks. */
  spans: Located[];
  /** Each line of each fenced code block, with the block's language (the fence's info string, lower case). */
  blockLines: Array<Located & { lang: string }>;
  /** Each fenced code block whole, with its language and the line of its first content line. */
  blocks: Array<Located & { lang: string }>;
  /** Lines outside fenced blocks, with their code spans blanked out (where links live). */
  prose: Located[];
}

/** Splits Markdown into code spans, code blocks and prose, keeping line numbers. */
export function parseMarkdown(markdown: string): MarkdownParts {
  const parts: MarkdownParts = { spans: [], blockLines: [], blocks: [], prose: [] };
  let fence: { marker: string; lang: string; start: number; lines: string[] } | undefined;
  let run: { start: number; lines: string[] } = { start: 1, lines: [] };
  const endRun = () => {
    if (run.lines.length > 0) inlineParts(run.start, run.lines, parts);
  };
  markdown.split('\n').forEach((text, index) => {
    const line = index + 1;
    const opening = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)/.exec(text);
    if (fence === undefined && opening) {
      endRun();
      fence = { marker: opening[1] as string, lang: (opening[2] ?? '').toLowerCase(), start: line + 1, lines: [] };
      return;
    }
    if (fence !== undefined) {
      if (text.trim().startsWith(fence.marker) && text.trim().replace(/[`~]/g, '') === '') {
        parts.blocks.push({ line: fence.start, lang: fence.lang, text: fence.lines.join('\n') });
        fence = undefined;
        run = { start: line + 1, lines: [] };
      } else {
        fence.lines.push(text);
        parts.blockLines.push({ line, lang: fence.lang, text });
      }
      return;
    }
    run.lines.push(text);
  });
  endRun();
  return parts;
}

/** Code spans (which may continue onto the next line, never past a paragraph) and the prose around them. */
function inlineParts(start: number, lines: readonly string[], parts: MarkdownParts): void {
  const text = lines.join('\n');
  const lineAt = (offset: number) => start + (text.slice(0, offset).match(/\n/g)?.length ?? 0);
  let prose = text;
  for (const match of text.matchAll(/(`+)([\s\S]+?)(?<!`)\1(?!`)/g)) {
    const body = match[2] as string;
    if (/\n\s*\n/.test(body)) continue;
    parts.spans.push({ line: lineAt(match.index), text: body.replace(/\s*\n\s*/g, ' ').trim() });
    prose = prose.slice(0, match.index) + match[0].replace(/[^\n]/g, ' ') + prose.slice(match.index + match[0].length);
  }
  prose.split('\n').forEach((t, i) => parts.prose.push({ line: start + i, text: t }));
}
