import { h } from './dom.js';
import { csvText, jsonText, type ExportValue } from './export-text.js';

export type { ExportValue } from './export-text.js';

/**
 * "Export: CSV · JSON" links that download what a table or chart shows, as its values (not its formatted text).
 * `name` becomes the file name (`name.csv`, `name.json`); the data is taken when the link is clicked.
 */
export function exportLinks(
  name: string,
  data: () => { headings: readonly string[]; rows: ReadonlyArray<readonly ExportValue[]> },
): HTMLElement {
  const file = name.replace(/[^A-Za-z0-9._-]+/g, '-');
  const download = (kind: 'csv' | 'json') => {
    const anchor = h('a', { href: '#', download: `${file}.${kind}`, 'data-export': kind }, kind.toUpperCase());
    anchor.addEventListener('click', () => {
      const { headings, rows } = data();
      const text = kind === 'csv' ? csvText(headings, rows) : jsonText(headings, rows);
      const type = kind === 'csv' ? 'text/csv' : 'application/json';
      const previous = anchor.getAttribute('href');
      if (previous?.startsWith('blob:')) URL.revokeObjectURL(previous);
      anchor.setAttribute('href', URL.createObjectURL(new Blob([text], { type })));
    });
    return anchor;
  };
  return h('span', { class: 'export muted' }, 'Export: ', download('csv'), ' · ', download('json'));
}
