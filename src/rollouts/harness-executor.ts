import type { HarnessExecutor, HarnessLaunch } from './executor.js';
import { programSpec, type HarnessSettings } from './harness-spec.js';
import { localExecutor } from './local-executor.js';
import type { CommandRunner } from './process.js';

/** Where the configured harness runs; a local one is spawned by `commands` (default: this process). */
export function harnessExecutor(settings: HarnessSettings, commands?: CommandRunner): HarnessExecutor {
  const { kubernetes } = settings;
  if (kubernetes)
    return loadedOnFirstUse(async () => (await import('./kubernetes/job-executor.js')).kubernetesExecutor(kubernetes));
  return localExecutor(programSpec(settings.local as NonNullable<HarnessSettings['local']>), commands);
}

/**
 * An executor whose module loads when it is first used: the Kubernetes client is a large module
 * tree, and a process that never runs a harness on a cluster (most workers, every CLI command) should
 * not pay for loading it.
 */
function loadedOnFirstUse(load: () => Promise<HarnessExecutor>): HarnessExecutor {
  let executor: Promise<HarnessExecutor> | undefined;
  const loaded = () => (executor ??= load());
  return {
    problems: async () => (await loaded()).problems(),
    run: async (launch) => (await loaded()).run(launch),
    resume: async (launch: HarnessLaunch) => {
      const e = await loaded();
      return e.resume ? e.resume(launch) : null;
    },
    close: async () => {
      if (executor) await (await executor).close?.();
    },
  };
}
