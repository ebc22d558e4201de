import { checkWorkerHost, type HostReport } from '../src/preflight/preflight.js';

export interface PreflightActivityDeps {
  dataDir: string;
  minFreeBytes?: number;
}

export function createPreflightActivities(deps: PreflightActivityDeps) {
  return {
    async checkWorkerHost(): Promise<HostReport> {
      return checkWorkerHost(deps);
    },
  };
}
