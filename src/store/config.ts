import { z } from 'zod';
import { storeUrlProblem } from './location.js';

/** The config's `store` section: SQLite files in dataDir, or one PostgreSQL database. */
export const storeSettings = z.strictObject({
  url: z
    .string()
    .superRefine((url, ctx) => {
      const problem = storeUrlProblem(url);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .optional()
    .describe(
      'postgres://user:password@host:5432/database: every store (traces, registry, decisions, ledgers) lives in that PostgreSQL database, so services on other hosts and several gateways share them; unset: SQLite files in dataDir (env REIN_STORE_URL)',
    ),
});

export type StoreSettings = z.output<typeof storeSettings>;
