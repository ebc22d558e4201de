/**
 * The paging rule's pieces: long tool output cut into pages of `pageSize` characters, the marker
 * that tells the caller how to ask for the next one, and the reading of a `page` argument. Pages
 * are cut by code point (never inside a surrogate pair) and hold the output's text exactly, so
 * the pages of one output, markers removed, concatenate to it.
 */

/** One tool's last full output, cut into pages (a short output is one page). */
export interface KeptPages {
  tool: string;
  pages: string[];
  /** Whether the step that produced the output ended the episode. */
  done: boolean;
}

/** The output cut into pages of at most `pageSize` code points; an empty output is one empty page. */
export function cutIntoPages(observation: string, pageSize: number): string[] {
  const codePoints = Array.from(observation);
  if (codePoints.length <= pageSize) return [observation];
  const pages: string[] = [];
  for (let start = 0; start < codePoints.length; start += pageSize)
    pages.push(codePoints.slice(start, start + pageSize).join(''));
  return pages;
}

/** The marker line after a page of a paged output (none when the output fit on one page). */
export function pageMarker(tool: string, page: number, total: number): string | null {
  if (total <= 1) return null;
  if (page < total) return `[page ${page} of ${total}; call ${tool} again with "page": ${page + 1} for more]`;
  return `[page ${page} of ${total}; no more pages]`;
}

/** Page `page` (from 1) as the caller reads it: its text, then the marker on a line of its own. */
export function pageWithMarker(kept: KeptPages, page: number): string {
  const marker = pageMarker(kept.tool, page, kept.pages.length);
  const text = kept.pages[page - 1] ?? '';
  return marker === null ? text : `${text}\n${marker}`;
}

/**
 * A `page` argument as a page number: a whole number ≥ 1, given as a number or as digits (models
 * send both); anything else is null.
 */
export function pageNumber(value: unknown): number | null {
  const n = typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 1 ? n : null;
}
