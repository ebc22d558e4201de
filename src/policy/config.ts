import { z } from 'zod';
import { port } from '../port-setting.js';

/** The config's `policyServer` section: the embedded CPU policy server. */
export const policyServerSettings = z.strictObject({
  enabled: z
    .boolean()
    .optional()
    .describe('Serve the embedded CPU policy; default: when gateway.backends is empty (the embedded default)'),
  host: z.string().default('127.0.0.1').describe('Address the embedded policy server listens on'),
  port: port.default(8401).describe('Port of the embedded policy server (OpenAI-compatible, vLLM-style token ids)'),
});
