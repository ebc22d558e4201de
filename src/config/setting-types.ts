import { z } from 'zod';

/**
 * Setting types several config sections share, each with the message a user needs when the value
 * is wrong (zod's own, "Invalid URL", reads as if it were the expectation).
 */

/** The name of an environment variable (where a secret is read from, or one passed on). */
export const environmentName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name: letters, digits and _, not starting with a digit');

/** An http(s) URL, e.g. an OpenAI-compatible server's base URL. */
export const httpUrl = z.url({
  protocol: /^https?$/,
  error: 'an http:// or https:// URL, e.g. http://127.0.0.1:8000/v1',
});
