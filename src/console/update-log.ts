import { ArtifactNotFoundError, type ArtifactStore } from '../artifacts/artifact-store.js';
import { updateLogName } from '../artifacts/iteration-artifacts.js';
import { uploadedLogText } from '../rollouts/rollout-logs.js';

/** An iteration's trainer log as uploaded so far (redacted, its start cut when long): live while the update runs. */
export interface UpdateLog {
  runId: string;
  iteration: number;
  uri: string;
  text: string;
  /** Bytes of the log's start the upload left out. */
  cutBytes: number;
}

export class UpdateLogNotFoundError extends Error {
  override name = 'UpdateLogNotFoundError';
}

export async function updateLog(artifacts: ArtifactStore, runId: string, iteration: number): Promise<UpdateLog> {
  const uri = artifacts.uriOf(updateLogName(runId, iteration));
  try {
    const { text, cutBytes } = uploadedLogText((await artifacts.get(uri)).toString('utf8'));
    return { runId, iteration, uri, text, cutBytes };
  } catch (err) {
    if (!(err instanceof ArtifactNotFoundError)) throw err;
    throw new UpdateLogNotFoundError(
      `iteration ${iteration} of run ${runId} has no trainer log in the artifact store (yet): it is uploaded from when its policy update starts`,
    );
  }
}
