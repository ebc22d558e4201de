import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { describe, expect, inject, it } from 'vitest';
import { runPreflight } from '../../src/client/preflight.js';
import { HISTORIES, recordHistory, recordingHistories } from '../helpers/histories.js';
import { withReinWorker } from '../helpers/temporal.js';

/**
 * Histories recorded from real runs (preflight here; an iteration and a run in
 * training-iteration.test.ts). A workflow change that would break runs already in flight fails
 * here before it ships. Record them all anew (after an intended change) with
 * `npm run record:histories`.
 */
const recorded = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));

function loadHistory(file: string) {
  return historyFromJSON(JSON.parse(readFileSync(path.join(HISTORIES, file), 'utf8')));
}

describe('workflow replay', () => {
  it('records a fresh preflight history and replays it with the current workflow code', async () => {
    const history = await withReinWorker(async ({ client, taskQueue }) => {
      const run = await runPreflight(client, taskQueue);
      return client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    });
    await Worker.runReplayHistory({ workflowBundle: { code: inject('workflowBundleCode') } }, history);
    if (recordingHistories) recordHistory(history, 'preflight.json');
  });

  it.each(recorded)('replays the recorded history %s without non-determinism', async (file) => {
    await Worker.runReplayHistory({ workflowBundle: { code: inject('workflowBundleCode') } }, loadHistory(file));
  });

  it('rejects a recorded history when the workflow code changed incompatibly', async () => {
    const changed = await bundleWorkflowCode({
      workflowsPath: path.resolve(import.meta.dirname, '../fixtures/nondeterministic/workflows.ts'),
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} },
    });
    await expect(
      Worker.runReplayHistory({ workflowBundle: changed }, loadHistory('preflight.json')),
    ).rejects.toBeInstanceOf(DeterminismViolationError);
  });
});
