import { withRolloutIds, type BuildBatchInput } from './batch-selection.js';
import { eventLoopTurns, whileHeartbeating } from './heartbeat.js';
import type { ArtifactStore } from '../src/artifacts/artifact-store.js';
import { lineageOf, type PolicyRegistry } from '../src/registry/policy-registry.js';
import { DataQualityError, runBatchStage, type BatchStageResult } from '../src/samples/stage.js';
import type { TraceStore } from '../src/store/trace-store.js';
import { DataQualityFailure } from '../workflows/failures.js';
import { runDepsFor, type RunDepsSource } from './run-deps.js';

export interface BatchActivityDeps {
  store: TraceStore;
  artifacts: ArtifactStore;
  /** The batch's sample settings and tokenizer: its run's own config, by the input's configHash. */
  runs: RunDepsSource;
  /** The lineage of the policy the batch trains: samples.maxVersionsBehind, and the report's staleness counts. */
  registry?: PolicyRegistry;
}

export function createBatchActivities(deps: BatchActivityDeps) {
  return {
    /**
     * Journal → batch artifact and data-quality report; untrustworthy evidence fails for good.
     * Heartbeats the rollouts read so far: the store's reads and tokenizing keep the event loop
     * busy, so the stage yields to it now and then for the heartbeat timer to run.
     */
    async buildBatch(request: BuildBatchInput): Promise<BatchStageResult> {
      const input = withRolloutIds(request);
      const progress = { stage: 'batch', rolloutsRead: 0, rollouts: input.rolloutIds.length };
      const turn = eventLoopTurns();
      const onRollout = async (done: number) => {
        progress.rolloutsRead = done;
        await turn();
      };
      try {
        const { samples, tokenizer } = await runDepsFor(deps.runs, input.configHash);
        // Fetched even without samples.maxVersionsBehind: the report counts kept rollouts by versions behind.
        const lineage =
          input.lineage ?? (deps.registry ? await lineageOf(deps.registry, input.policyVersion) : undefined);
        return await whileHeartbeating(
          () =>
            runBatchStage(
              { ...input, ...(lineage && { lineage }) },
              {
                store: deps.store,
                artifacts: deps.artifacts,
                settings: samples,
                onRollout,
                ...(tokenizer && { tokenizer }),
              },
            ),
          () => ({ ...progress }),
        );
      } catch (err) {
        if (err instanceof DataQualityError) {
          throw new DataQualityFailure(err.message, { problems: err.problems, reportUri: err.reportUri });
        }
        throw err;
      }
    },
  };
}
