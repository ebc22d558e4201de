import { readFileSync } from 'node:fs';
import path from 'node:path';
import { failureClassesMarkdown } from '../../src/rollouts/failure-classes.js';

export const FAILURE_CLASSES_PAGE = 'docs/rollouts.md';
const BEGIN = '<!-- failure classes: written by `npm run docs` from src/rollouts/failure-classes.ts -->';
const END = '<!-- end of failure classes -->';

/** docs/rollouts.md with its failure-class table written from the one table in src/rollouts/failure-classes.ts. */
export function failureClassesPage(root: string): string {
  const text = readFileSync(path.join(root, FAILURE_CLASSES_PAGE), 'utf8');
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`${FAILURE_CLASSES_PAGE} has lost its markers ${BEGIN} … ${END}`);
  return `${text.slice(0, begin)}${BEGIN}\n\n${failureClassesMarkdown()}\n\n${text.slice(end)}`;
}
