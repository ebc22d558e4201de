import { ApplicationFailure } from '@temporalio/activity';
import type { LocalArtifactStore } from '../src/artifacts/local-store.js';
import type { SampleSettings } from '../src/config/schema.js';
import { DataQualityError, runBatchStage, type BatchStageInput, type BatchStageResult } from '../src/samples/stage.js';
import type { TraceStore } from '../src/store/trace-store.js';
import type { ChatTokenizer } from '../src/tokenizer/chat-tokenizer.js';

export interface BatchActivityDeps {
  store: TraceStore;
  artifacts: LocalArtifactStore;
  samples: SampleSettings;
  tokenizer?: ChatTokenizer;
}

export function createBatchActivities(deps: BatchActivityDeps) {
  return {
    /** Journal → batch artifact and data-quality report; untrustworthy evidence fails for good. */
    async buildBatch(input: BatchStageInput): Promise<BatchStageResult> {
      try {
        return await runBatchStage(input, { store: deps.store, artifacts: deps.artifacts, settings: deps.samples, ...(deps.tokenizer && { tokenizer: deps.tokenizer }) });
      } catch (err) {
        if (err instanceof DataQualityError) {
          throw ApplicationFailure.nonRetryable(err.message, 'DataQualityError', { problems: err.problems, reportUri: err.reportUri });
        }
        throw err;
      }
    },
  };
}
