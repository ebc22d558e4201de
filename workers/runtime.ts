import { Runtime, type LogLevel, type LogMetadata, type Logger as TemporalLogger } from '@temporalio/worker';
import type { Logger } from '../src/log/logger.js';

let installed = false;

/**
 * Routes the Temporal SDK's logs into Rein's logger. The SDK's worker-state chatter is INFO, so
 * it shows only when Rein itself logs at debug or finer.
 */
export function installTemporalRuntime(logger: Logger): void {
  if (installed) return;
  installed = true;
  // Rein's commands handle SIGINT/SIGTERM themselves and shut workers down in order.
  Runtime.install({ logger: temporalLogger(logger), shutdownSignals: [] });
}

/**
 * The SDK's logger interface on top of Rein's. The SDK puts errors in the metadata (`error`):
 * Rein's logger writes them with their message, type and causes (see createLogger).
 */
export function temporalLogger(logger: Logger): TemporalLogger {
  const sdk = logger.child({ component: 'temporal-sdk' });
  const quiet = logger.levelVal > 20;
  const toPino: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
    TRACE: 'trace',
    DEBUG: 'debug',
    INFO: quiet ? 'debug' : 'info',
    WARN: 'warn',
    ERROR: 'error',
  };
  const log = (level: LogLevel, message: string, meta?: LogMetadata) => sdk[toPino[level]](meta ?? {}, message);
  return {
    log,
    trace: (m, meta) => log('TRACE', m, meta),
    debug: (m, meta) => log('DEBUG', m, meta),
    info: (m, meta) => log('INFO', m, meta),
    warn: (m, meta) => log('WARN', m, meta),
    error: (m, meta) => log('ERROR', m, meta),
  };
}
