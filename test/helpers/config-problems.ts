import { ConfigError } from '../../src/config/load.js';

/** The problems of the ConfigError `fn` throws; anything else thrown, or nothing, fails the test. */
export function configProblems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('expected a ConfigError');
}
