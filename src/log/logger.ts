import { pino, type Logger as PinoLogger } from 'pino';
import type { ReinConfig } from '../config/schema.js';

export type Logger = PinoLogger;

/** Logs go to stderr as JSON lines, so stdout stays for a command's results. */
export function createLogger(level: ReinConfig['log']['level'], name = 'rein'): Logger {
  return pino({ name, level }, pino.destination(2));
}
