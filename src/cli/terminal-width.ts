/**
 * The width tables fit: the terminal's when stdout is one, else $COLUMNS when set (as shells export it); undefined
 * when output goes to a file or a pipe without it, where every column is printed.
 */
export function terminalWidth(stream: { isTTY?: boolean; columns?: number } = process.stdout): number | undefined {
  if (stream.isTTY && stream.columns) return stream.columns;
  const columns = Number(process.env.COLUMNS);
  return Number.isInteger(columns) && columns > 0 ? columns : undefined;
}
