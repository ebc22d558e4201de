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
    const anchor = document.createElement('a');
    anchor.href = '#';
    anchor.download = `${file}.${kind}`;
    anchor.dataset.export = kind;
    anchor.textContent = kind.toUpperCase();
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
  const links = document.createElement('span');
  links.className = 'export muted';
  links.append('Export: ', download('csv'), ' · ', download('json'));
  return links;
}

/** What a table shows, as text: its headings and each row's cells. */
export function tableTexts(table: HTMLTableElement): { headings: string[]; rows: string[][] } {
  const texts = (cells: Iterable<Element>) => Array.from(cells, (c) => (c.textContent ?? '').trim());
  return {
    headings: texts(table.querySelectorAll('thead th')),
    rows: Array.from(table.querySelectorAll('tbody tr'), (tr) => texts(tr.querySelectorAll(':scope > td'))),
  };
}
