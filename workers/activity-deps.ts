import path from 'node:path';
import type { ActivityDeps } from '../activities/index.js';
import { LocalArtifactStore } from '../src/artifacts/local-store.js';
import type { ReinConfig } from '../src/config/schema.js';
import { gatewayControlFromConfig } from '../src/gateway/from-config.js';
import { SqliteTraceStore } from '../src/store/sqlite-store.js';
import { ChatTokenizer } from '../src/tokenizer/chat-tokenizer.js';

/** The activities' dependencies for a worker, from the config: the trace store, artifacts, tokenizer. */
export function activityDepsFromConfig(config: ReinConfig): { deps: ActivityDeps; close(): Promise<void> } {
  const store = new SqliteTraceStore(config.gateway.traceDb);
  const gateway = gatewayControlFromConfig(config.gateway);
  const deps: ActivityDeps = {
    ...(gateway && { gateway }),
    dataDir: config.dataDir,
    store,
    artifacts: new LocalArtifactStore(path.join(config.dataDir, 'artifacts')),
    samples: config.samples,
    rollouts: config.rollouts,
    ...(config.harness && { harness: config.harness }),
    ...(config.verifier && { verifier: config.verifier }),
    ...(config.samples.tokenizerDir && { tokenizer: ChatTokenizer.fromDirectory(config.samples.tokenizerDir) }),
  };
  return { deps, close: () => store.close() };
}
