import { ApplicationFailure } from '@temporalio/activity';
import type { LocalArtifactStore } from '../src/artifacts/local-store.js';
import type { SampleSettings } from '../src/config/schema.js';
import { lineageOf, type PolicyRegistry } from '../src/registry/policy-registry.js';
import { DataQualityError, runBatchStage, type BatchStageInput, type BatchStageResult } from '../src/samples/stage.js';
import type { TraceStore } from '../src/store/trace-store.js';
import type { ChatTokenizer } from '../src/tokenizer/chat-tokenizer.js';

export interface BatchActivityDeps {
  store: TraceStore;
  artifacts: LocalArtifactStore;
  samples: SampleSettings;
  tokenizer?: ChatTokenizer;
  /** For samples.maxVersionsBehind: the lineage of the policy the batch trains. */
  registry?: PolicyRegistry;
}

export function createBatchActivities(deps: BatchActivityDeps) {
  return {
    /** Journal → batch artifact and data-quality report; untrustworthy evidence fails for good. */
    async buildBatch(input: BatchStageInput): Promise<BatchStageResult> {
      try {
        const lineage = input.lineage ?? (deps.samples.maxVersionsBehind !== undefined && deps.registry ? lineageOf(deps.registry, input.policyVersion) : undefined);
        return await runBatchStage({ ...input, ...(lineage && { lineage }) }, { store: deps.store, artifacts: deps.artifacts, settings: deps.samples, ...(deps.tokenizer && { tokenizer: deps.tokenizer }) });
      } catch (err) {
        if (err instanceof DataQualityError) {
          throw ApplicationFailure.nonRetryable(err.message, 'DataQualityError', { problems: err.problems, reportUri: err.reportUri });
        }
        throw err;
      }
    },
  };
}
