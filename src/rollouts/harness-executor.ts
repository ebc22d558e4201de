import type { HarnessExecutor } from './executor.js';
import { programSpec, type HarnessSettings } from './harness-spec.js';
import { kubernetesExecutor } from './kubernetes/job-executor.js';
import { localExecutor } from './local-executor.js';
import type { CommandRunner } from './process.js';

/** Where the configured harness runs; a local one is spawned by `commands` (default: this process). */
export function harnessExecutor(settings: HarnessSettings, commands?: CommandRunner): HarnessExecutor {
  if (settings.kubernetes) return kubernetesExecutor(settings.kubernetes);
  return localExecutor(programSpec(settings.local as NonNullable<HarnessSettings['local']>), commands);
}
