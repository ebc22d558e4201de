/** No run by that id (or none running, for a signal). */
export class RunNotFoundError extends Error {}
export class RunExistsError extends Error {}
/** Another running run promotes into the same alias of the same store. */
export class PromotionConflictError extends Error {}
/**
 * The run cannot be continued as asked (still running, completed, or started again meanwhile); the message says what to
 * do.
 */
export class RunNotResumableError extends Error {}

const DEADLINE_EXCEEDED = 4;
export const FAILED_PRECONDITION = 9;
export const UNAVAILABLE = 14;

/**
 * True when a call failed because Temporal could not be reached or did not answer in time (gRPC
 * UNAVAILABLE or DEADLINE_EXCEEDED anywhere in the cause chain), not because of what was asked.
 */
export function isTemporalUnreachable(err: unknown): boolean {
  const code = grpcCode(err);
  return code === UNAVAILABLE || code === DEADLINE_EXCEEDED;
}

/** The gRPC status code of the first error in the cause chain that has one. */
export function grpcCode(err: unknown): number | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    const { code } = e as { code?: unknown };
    if (typeof code === 'number') return code;
  }
  return undefined;
}

/** Every message of an error's cause chain, once each, joined with ": ". */
export function failureMessage(err: unknown): string {
  let e = err as Error | undefined;
  const parts: string[] = [];
  while (e) {
    if (e.message && !parts.includes(e.message)) parts.push(e.message);
    e = e.cause as Error | undefined;
  }
  return parts.join(': ') || String(err);
}
