import type { HarnessExecutor } from './executor.js';
import { programSpec, type HarnessSettings } from './harness-spec.js';
import { kubernetesExecutor } from './kubernetes/job-executor.js';
import { localExecutor } from './local-executor.js';

/** Where the configured harness runs. */
export function harnessExecutor(settings: HarnessSettings): HarnessExecutor {
  if (settings.kubernetes) return kubernetesExecutor(settings.kubernetes);
  return localExecutor(programSpec(settings.local as NonNullable<HarnessSettings['local']>));
}
