import { z } from 'zod';

/** pino's levels, and `silent` for none. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The config's `log` section. */
export const logSettings = z.strictObject({
  level: z.enum(LOG_LEVELS).default('info').describe('Least severe level logged (env REIN_LOG_LEVEL)'),
});

export type LogSettings = z.output<typeof logSettings>;
