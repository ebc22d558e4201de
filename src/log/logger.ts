import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import type { LogLevel } from './config.js';

export type Logger = PinoLogger;

/** Logs go to stderr as JSON lines, so stdout stays for a command's results. */
export function createLogger(
  level: LogLevel,
  name = 'rein',
  destination: DestinationStream = pino.destination(2),
): Logger {
  return pino(
    {
      name,
      level,
      // JSON.stringify writes an Error as {}; pino's own serializer covers only the `err` key,
      // while the Temporal SDK and others log theirs under `error` and more.
      formatters: {
        log: (fields) =>
          Object.fromEntries(
            Object.entries(fields).map(([key, value]) => [key, value instanceof Error ? errorFields(value) : value]),
          ),
      },
      serializers: { err: (value: unknown) => (value instanceof Error ? errorFields(value) : value) },
    },
    destination,
  );
}

export interface ErrorFields {
  name: string;
  message: string;
  /** An ApplicationFailure's type (e.g. DiskSpaceError). */
  type?: string;
  /** A system or gRPC error's code (ENOSPC, 14). */
  code?: string | number;
  /** The first frames: enough to find the place, short enough to read in a log line. */
  stack?: string;
  /**
   * What each cause said, outermost first (a Temporal ActivityFailure's message is generic; the reason is in its
   * cause).
   */
  causes?: string[];
}

const STACK_LINES = 6;

/** An Error as fields a log line can hold: its message, a short stack and the messages of its causes. */
export function errorFields(err: Error): ErrorFields {
  const { type, code } = kind(err);
  const fields: ErrorFields = { name: err.name, message: err.message };
  if (type !== undefined) fields.type = type;
  if (code !== undefined) fields.code = code;
  if (err.stack) fields.stack = err.stack.split('\n').slice(0, STACK_LINES).join('\n');
  const causes: string[] = [];
  const seen = new Set<unknown>([err]);
  for (
    let cause = err.cause;
    cause !== undefined && cause !== null && !seen.has(cause);
    cause = cause instanceof Error ? cause.cause : undefined
  ) {
    seen.add(cause);
    if (cause instanceof Error) {
      const label = kind(cause).type ?? kind(cause).code;
      causes.push(`${cause.name}${label === undefined ? '' : ` (${label})`}: ${cause.message}`);
    } else causes.push(String(cause));
  }
  if (causes.length > 0) fields.causes = causes;
  return fields;
}

function kind(err: Error): { type: string | undefined; code: string | number | undefined } {
  const { type, code } = err as { type?: unknown; code?: unknown };
  return {
    type: typeof type === 'string' && type !== '' ? type : undefined,
    code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
  };
}
