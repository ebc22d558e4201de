/** Tables and curves as files: CSV and JSON texts (no DOM here, so tests run them as they are). */

/** A cell as exported: numbers stay numbers in JSON; CSV writes them as text. */
export type ExportValue = string | number | boolean | null;

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
export function csvText(headings: readonly string[], rows: ReadonlyArray<readonly ExportValue[]>): string {
  const field = (value: ExportValue) => {
    const text = value === null ? '' : String(value);
    return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
  };
  return [headings, ...rows].map((row) => row.map(field).join(',')).join('\r\n') + '\r\n';
}

/** The rows as JSON objects keyed by heading. */
export function jsonText(headings: readonly string[], rows: ReadonlyArray<readonly ExportValue[]>): string {
  return `${JSON.stringify(
    rows.map((row) => Object.fromEntries(headings.map((heading, i) => [heading, row[i] ?? null]))),
    null,
    2,
  )}\n`;
}
