import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { LocalArtifactStore } from '../../src/artifacts/local-store.js';
import type { ReinConfig } from '../../src/config/schema.js';
import { packageRoot } from '../../src/package-root.js';
import type { RolloutOutcome } from '../../src/rollouts/rollout-batch.js';
import { MERGE_MODES, type MergeMode } from '../../src/samples/merge-modes.js';
import { mergeRollout } from '../../src/samples/merge.js';
import { toMergeCalls } from '../../src/samples/retokenize.js';
import { runBatchStage, type DataQualityReport } from '../../src/samples/stage.js';
import type { CallRecord, TraceStore } from '../../src/store/trace-store.js';
import type { ChatTokenizer } from '../../src/tokenizer/chat-tokenizer.js';

/**
 * What the framework gallery's tests (frameworks-python, frameworks-node) check of each framework's
 * rollouts, and the numbers they record for BENCHMARKS.md's framework table.
 */

/**
 * The merge mode the gallery's rollouts and batches use: exact in CI; REIN_GALLERY_MERGE=tito or
 * stepwise measures the others.
 */
export function galleryMergeMode(): MergeMode {
  const mode = (process.env.REIN_GALLERY_MERGE ?? 'exact') as MergeMode;
  if (!MERGE_MODES.includes(mode)) throw new Error(`REIN_GALLERY_MERGE must be one of ${MERGE_MODES.join(', ')}`);
  return mode;
}

export interface GalleryCheck {
  store: TraceStore;
  tokenizer: ChatTokenizer;
  config: ReinConfig;
  merge: MergeMode;
  /** Where the batch artifacts go. */
  workDir: string;
  /** The test file's name, for the batch's config hash. */
  suite: string;
  name: string;
  framework: string;
  endpoint: string;
}

/** Every call journaled as `endpoint`'s with prompt ids, completion ids and a log-prob per completion token. */
function expectCapturedWithIds(calls: readonly CallRecord[], endpoint: string): number {
  let completionTokens = 0;
  for (const call of calls) {
    expect(call, `call ${call.seq}: ${call.errorClass ?? ''} ${call.errorMessage ?? ''}`).toMatchObject({
      endpoint,
      status: 'ok',
      policyVersion: 'v0',
    });
    expect(call.promptIds?.length).toBeGreaterThan(0);
    const [choice] = call.choices ?? [];
    expect(choice?.completionIds?.length).toBeGreaterThan(0);
    expect(choice?.logprobs).toHaveLength(choice?.completionIds?.length ?? -1);
    completionTokens += choice?.completionIds?.length ?? 0;
  }
  return completionTokens;
}

/** The journal of a framework's rollouts: every call captured, each rollout trainable, the tool loop run. */
async function journalOf(check: GalleryCheck, outcomes: readonly RolloutOutcome[]) {
  const journal = { calls: 0, multiTurn: 0, completionTokens: 0, requestFields: new Set<string>() };
  for (const { rolloutId } of outcomes) {
    const journaled = await check.store.listCalls(rolloutId);
    for (const call of journaled)
      for (const key of Object.keys(call.requestReceived as object)) journal.requestFields.add(key);
    expect(journaled.length).toBeGreaterThan(0);
    journal.calls += journaled.length;
    if (journaled.length > 1) journal.multiTurn++;
    journal.completionTokens += expectCapturedWithIds(journaled, check.endpoint);
    // Each rollout trains: at least one sequence from its calls.
    const merged = mergeRollout(rolloutId, toMergeCalls(journaled, check.tokenizer).calls, check.tokenizer);
    expect(merged.sequences.length).toBeGreaterThan(0);
  }
  // The framework ran its tool loop: the model called its tool and the framework sent the result back.
  expect(journal.multiTurn).toBeGreaterThan(0);
  return journal;
}

/**
 * Checks a framework's rollouts as a user relies on them (every one scored by the verifier, every
 * call captured with ids, a batch built, every break of a rollout named), and returns its row.
 */
export async function checkGalleryRollouts(
  check: GalleryCheck,
  outcomes: readonly RolloutOutcome[],
  secondsPerRollout: number,
): Promise<Record<string, unknown>> {
  expect(outcomes.map((o) => [o.status, o.reason])).toEqual(outcomes.map(() => ['succeeded', null]));
  for (const outcome of outcomes) expect(outcome.reward).toEqual(expect.any(Number));
  const journal = await journalOf(check, outcomes);

  const result = await runBatchStage(
    { iteration: 1, policyVersion: 'v0', configHash: check.suite, rolloutIds: outcomes.map((o) => o.rolloutId) },
    {
      store: check.store,
      artifacts: new LocalArtifactStore(path.join(check.workDir, check.name, 'artifacts')),
      settings: { ...check.config.samples, merge: check.merge, zeroVarianceGroups: 'keep' },
      tokenizer: check.tokenizer,
    },
  );
  expect(result.summary).toMatchObject({ rolloutsUsed: outcomes.length, rolloutsExcluded: 0 });
  expect(result.summary.sequences).toBeGreaterThanOrEqual(outcomes.length);
  const report = JSON.parse(readFileSync(fileURLToPath(result.report.uri), 'utf8')) as DataQualityReport;
  expect(report.calls).toMatchObject({ total: journal.calls, skippedWithoutTokenIds: 0, missingLogprobs: 0 });
  // Every break of a rollout into more sequences has its cause in the report; under stepwise every call is a
  // sequence, and the causes still say where exact merging would break.
  const breaks = Object.values(report.mismatchCauses).reduce((a, b) => a + b, 0);
  if (check.merge === 'stepwise') expect(result.summary.sequences).toBe(report.calls.total);
  else expect(breaks).toBe(result.summary.sequences - outcomes.length);
  expect(report.rewards?.count).toBe(outcomes.length);

  const { calls, multiTurn, completionTokens, requestFields } = journal;
  return {
    framework: check.framework,
    api: check.endpoint,
    rollouts: outcomes.length,
    calls,
    multiTurnRollouts: multiTurn,
    requestFields: [...requestFields].sort(),
    sequences: result.summary.sequences,
    mergeRate: report.mergeRate,
    mismatchCauses: report.mismatchCauses,
    completionTokens,
    trainedTokens: report.tokens.trained,
    trainedShare: completionTokens === 0 ? 0 : report.tokens.trained / completionTokens,
    // Replies cut at max_tokens make their rollout truncated: samples.truncated decides (masked here).
    truncatedRollouts: report.truncatedRollouts,
    meanReward: result.summary.meanReward,
    secondsPerRollout,
  };
}

/** test-artifacts/SUITE.json (SUITE-MODE.json for a mode other than exact). */
export function writeGalleryResults(suite: string, merge: MergeMode, results: Record<string, unknown>): void {
  const dir = path.join(packageRoot(), 'test-artifacts');
  mkdirSync(dir, { recursive: true });
  const file = `${suite}${merge === 'exact' ? '' : `-${merge}`}.json`;
  writeFileSync(path.join(dir, file), `${JSON.stringify(results, null, 2)}\n`);
}
