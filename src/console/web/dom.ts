/** Small DOM helpers: elements from a tag, attributes and children; the pages are built from these. */

import { exportLinks, tableTexts } from './export.js';

type Child = Node | string | number | null | undefined | false;
type Attributes = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

export function h(tag: string, attributes: Attributes = {}, ...children: Array<Child | Child[]>): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.replace(/^on/, ''), value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(typeof child === 'object' ? child : String(child));
  }
  return element;
}

/**
 * A table from column headings and rows of cells. A named table (one with an `id`) can be downloaded as CSV or JSON
 * of what it shows, unless `exported` is false (a page exporting the values behind it instead).
 */
export function table(
  headings: string[],
  rows: Array<Array<Child | Child[]>>,
  attributes: Attributes = {},
  { exported = true }: { exported?: boolean } = {},
): HTMLElement {
  const element = tableOf(headings, rows, attributes);
  if (!exported || typeof attributes.id !== 'string') return element;
  return h(
    'div',
    { class: 'table-block' },
    element,
    exportLinks(attributes.id, () => tableTexts(element as HTMLTableElement)),
  );
}

function tableOf(headings: string[], rows: Array<Array<Child | Child[]>>, attributes: Attributes): HTMLElement {
  return h(
    'table',
    attributes,
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headings.map((t) => h('th', {}, t)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((cells) =>
        h(
          'tr',
          {},
          cells.map((c) => h('td', {}, c)),
        ),
      ),
    ),
  );
}

/** A definition list of facts: label, value. */
export function facts(entries: Array<[string, Child | Child[]]>): HTMLElement {
  return h(
    'dl',
    { class: 'facts' },
    entries.flatMap(([label, value]) => [h('dt', {}, label), h('dd', {}, value)]),
  );
}

export const link = (href: string, text: string, attributes: Attributes = {}) => h('a', { href, ...attributes }, text);

export const pct = (x: number | null | undefined) => (x === null || x === undefined ? '–' : `${(x * 100).toFixed(1)}%`);
export const num = (x: number | null | undefined, digits = 3) =>
  x === null || x === undefined ? '–' : Number.isInteger(x) ? String(x) : x.toFixed(digits);
export const ms = (x: number | null | undefined) =>
  x === null || x === undefined ? '–' : x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${Math.round(x)} ms`;
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '–');
export const verdict = (v: string | null | undefined) => (v ? h('span', { class: v }, v.toUpperCase()) : '–');

/** JSON shown as text, for the parts of a record with no page of their own. */
export const json = (value: unknown) =>
  h('pre', {}, typeof value === 'string' ? value : JSON.stringify(value, null, 2));
