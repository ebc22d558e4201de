import path from 'node:path';
import type { ReinConfig } from '../config/schema.js';
import type { ArtifactStore } from './artifact-store.js';
import { LocalArtifactStore } from './local-store.js';
import { S3ArtifactStore } from './s3-store.js';

/** The configured artifact store: artifacts.url's bucket (s3://…), else the folder dataDir/artifacts. */
export function artifactStoreFromConfig(config: Pick<ReinConfig, 'dataDir' | 'artifacts'>): ArtifactStore {
  const { url, s3 } = config.artifacts;
  return url ? new S3ArtifactStore(url, s3) : new LocalArtifactStore(localArtifactsDir(config) as string);
}

/** The folder the configured artifact store writes to on this machine; null when artifacts are in S3. */
export function localArtifactsDir(config: Pick<ReinConfig, 'dataDir' | 'artifacts'>): string | null {
  return config.artifacts.url ? null : path.join(config.dataDir, 'artifacts');
}

/**
 * Where a process keeps local copies of remote artifacts it reads (batches for the trainer, checkpoints for the policy
 * server).
 */
export const stagingDir = (dataDir: string): string => path.join(dataDir, 'staging');
