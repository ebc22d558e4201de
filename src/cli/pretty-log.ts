import type { DestinationStream } from 'pino';

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
// pino's own fields: shown as the line's head, not repeated among the fields.
const HEAD = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

/**
 * One pino JSON line as a person reads it on a terminal: "12:04:31 WARN  gateway listening
 * url=http://…". Lines that are not JSON pass through as they are.
 */
export function prettyLine(line: string): string {
  let fields: Record<string, unknown>;
  try {
    fields = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const time = typeof fields.time === 'number' ? new Date(fields.time).toISOString().slice(11, 19) : '--:--:--';
  const level = (LEVELS[fields.level as number] ?? String(fields.level)).padEnd(5);
  const rest = Object.entries(fields)
    .filter(([key]) => !HEAD.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' && !/\s/.test(value) ? value : JSON.stringify(value)}`);
  return `${time} ${level} ${String(fields.msg ?? '')}${rest.length > 0 ? `  ${rest.join(' ')}` : ''}\n`;
}

/** A pino destination that writes pretty lines to a terminal (JSON lines stay the format for files and pipes). */
export function prettyDestination(out: NodeJS.WritableStream): DestinationStream {
  return { write: (line: string) => void out.write(prettyLine(line.trimEnd())) };
}
