import { fileURLToPath } from 'node:url';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { isFinalCancel, keepHeartbeating } from './heartbeat.js';
import type { GatewayControlClient } from '../src/gateway/control-client.js';
import { PolicyConflictError, type PolicyRegistry } from '../src/registry/policy-registry.js';
import type { ImportanceReport } from '../src/samples/importance-weights.js';
import type { ArtifactStore } from '../src/artifacts/artifact-store.js';
import { DEFAULT_REDACTION_RULES, type RedactionRule } from '../src/gateway/redact.js';
import { PolicySetupError } from '../src/training/errors.js';
import { updatePolicy, type PolicyTrainer, type PolicyUpdateJob } from '../src/training/policy-update.js';
import { PolicyUpdateFailure, PolicyUpdateRetryFailure } from '../workflows/failures.js';

export interface PolicyActivityDeps {
  registry?: PolicyRegistry;
  trainer?: PolicyTrainer;
  gateway?: GatewayControlClient;
  serving?: { backend: string; endpoints: string[] };
  policiesDir: string;
  /** Where the trainer's log goes while it runs, redacted by these rules (the gateway's): the console's live log. */
  artifacts?: ArtifactStore;
  redaction?: readonly RedactionRule[];
}

export interface UpdatePolicyInput extends Omit<PolicyUpdateJob, 'batchPath'> {
  batchUri: string;
}

/** Small enough for workflow history: the version, its lineage and the trainer's headline numbers. */
export interface UpdatePolicySummary {
  version: string;
  parent: string;
  checkpointUri: string;
  steps: number;
  approxKl: number;
  clipFraction: number;
  reused: boolean;
  seconds: number;
  /** The off-policy correction, when the batch had one: ratio statistics, capped and masked shares (~400 B). */
  importanceWeights?: ImportanceReport;
}

export function createPolicyActivities(deps: PolicyActivityDeps) {
  return {
    /** Registers the policy a run starts from as a lineage root (once; the same again is a no-op). */
    async registerBasePolicy(input: { version: string; checkpointUri: string }): Promise<void> {
      if (!deps.registry) throw new PolicyUpdateFailure('this worker has no policy registry');
      try {
        await deps.registry.register({
          ...input,
          parent: null,
          runId: null,
          iteration: null,
          batchContentHash: null,
          trainerMetrics: {},
        });
      } catch (err) {
        if (err instanceof PolicyConflictError) throw new PolicyUpdateFailure(err.message);
        throw err;
      }
    },

    /** Trains, registers and serves the iteration's new policy version; a retry never trains the batch twice. */
    async updatePolicy(input: UpdatePolicyInput): Promise<UpdatePolicySummary> {
      const { registry, trainer, gateway, serving } = deps;
      if (!registry || !trainer || !gateway || !serving) {
        throw new PolicyUpdateFailure(
          'this worker cannot update policies: its config needs a gateway admin key and trainer.servingBackend naming a gateway backend',
        );
      }
      const context = Context.current();
      const stopHeartbeat = keepHeartbeating(context, () => ({ stage: 'training' }));
      try {
        const { batchUri, ...job } = input;
        const { policy, train } = await updatePolicy(
          { ...job, batchPath: batchUri.startsWith('file:') ? fileURLToPath(batchUri) : batchUri },
          {
            registry,
            trainer,
            gateway,
            serving,
            policiesDir: deps.policiesDir,
            signal: context.cancellationSignal,
            handedBack: () => !isFinalCancel(context),
            ...(deps.artifacts && {
              logUpload: { artifacts: deps.artifacts, redaction: deps.redaction ?? DEFAULT_REDACTION_RULES },
            }),
          },
        );
        return {
          version: policy.version,
          parent: input.parentVersion,
          checkpointUri: policy.checkpointUri,
          steps: train.steps,
          approxKl: train.metrics.approxKl,
          clipFraction: train.metrics.clipFraction,
          reused: train.reused,
          seconds: train.seconds,
          ...(train.importanceWeights && { importanceWeights: train.importanceWeights }),
        };
      } catch (err) {
        // Only a wrong setup or input fails for good. A trainer that crashed, was killed (the OOM
        // killer) or was stopped by a shutdown, and a backend that would not load the version, are
        // retried: the trainer reuses a finished result, so nothing trains twice.
        if (err instanceof PolicySetupError) throw new PolicyUpdateFailure(err.message);
        if (err instanceof ApplicationFailure) throw err;
        throw new PolicyUpdateRetryFailure((err as Error).message);
      } finally {
        stopHeartbeat();
      }
    },
  };
}
