import { z } from 'zod';

/** A TCP port: the config's setting for each server Rein starts or reaches. */
export const port = z.number().int().min(1).max(65535);
