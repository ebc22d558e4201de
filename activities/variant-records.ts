import { ArtifactNotFoundError, type ArtifactStore } from '../src/artifacts/artifact-store.js';
import type { RolloutEvidence } from '../src/environments/rigger-evidence.js';
import type { RiggerReport } from '../src/environments/run-variants.js';

/**
 * Where a run keeps what it decided about its environment's variants, in the artifact store: one
 * verdict per variant (judged once per run, read by every later iteration), and per iteration the
 * rigger's evidence and report. Each is written once; a retried activity reads it back, so a
 * verdict or a proposal never changes under a run.
 */
export const variantRecords = {
  verdict: (runId: string, variantId: string) => `runs/${runId}/variants/${variantId}.json`,
  evidence: (runId: string, iteration: number) => `runs/${runId}/rigger/evidence-it${iteration}.json`,
  report: (runId: string, iteration: number) => `runs/${runId}/rigger/it${iteration}.json`,
};

/** The record under `name`, or null when none was written. */
export async function readRecord<T>(artifacts: ArtifactStore, name: string): Promise<T | null> {
  try {
    return JSON.parse((await artifacts.get(artifacts.uriOf(name))).toString('utf8')) as T;
  } catch (err) {
    if (err instanceof ArtifactNotFoundError) return null;
    throw err;
  }
}

/** The record under `name`: the one written before (a retry's), else `make()`'s, written now; with its URI. */
export async function recordOnce<T>(
  artifacts: ArtifactStore,
  name: string,
  make: () => T | Promise<T>,
): Promise<{ record: T; uri: string }> {
  const stored = await readRecord<T>(artifacts, name);
  if (stored !== null) return { record: stored, uri: artifacts.uriOf(name) };
  const record = await make();
  return { record, uri: (await artifacts.put(name, JSON.stringify(record))).uri };
}

/** The rigger's reports after iterations 1..`through` (those it wrote: it may have been off, or found nothing). */
export async function riggerReports(artifacts: ArtifactStore, runId: string, through: number): Promise<RiggerReport[]> {
  const reports = await Promise.all(
    Array.from({ length: Math.max(0, through) }, (_, i) =>
      readRecord<RiggerReport>(artifacts, variantRecords.report(runId, i + 1)),
    ),
  );
  return reports.filter((r): r is RiggerReport => r !== null);
}

/** The evidence kept for iterations `from`..`through`. */
export async function windowEvidence(
  artifacts: ArtifactStore,
  runId: string,
  from: number,
  through: number,
): Promise<RolloutEvidence[]> {
  const iterations = Array.from({ length: Math.max(0, through - from + 1) }, (_, i) => from + i);
  const kept = await Promise.all(
    iterations.map((i) => readRecord<RolloutEvidence[]>(artifacts, variantRecords.evidence(runId, i))),
  );
  return kept.flatMap((e) => e ?? []);
}
