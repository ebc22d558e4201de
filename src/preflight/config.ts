import { z } from 'zod';
import { DEFAULT_MIN_FREE_MEGABYTES } from './disk-space.js';

/** The config's `storage` section: the free space Rein needs in dataDir. */
export const storageSettings = z.strictObject({
  minFreeMegabytes: z
    .number()
    .int()
    .min(0)
    .default(DEFAULT_MIN_FREE_MEGABYTES)
    .describe(
      'Below this much free space (MiB) in dataDir, preflight fails and every activity refuses to start (a retryable DiskSpaceError that says so); 0: no check',
    ),
});
