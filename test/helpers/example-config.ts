import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { inject } from 'vitest';
import { packageRoot } from '../../src/package-root.js';
import { freePort } from './ports.js';
import { suiteStoreSettings } from './postgres.js';

export const exampleDir = path.join(packageRoot(), 'examples', 'calculator-agent');

/**
 * A config file for the example agent on the embedded default, pointed at the shared test dev
 * server with its own task queue, data directory and free ports (what examples/calculator-agent/rein.yaml
 * says, made safe to run beside other tests). `harnessEnv`: fixed variables for the example harness,
 * e.g. `AGENT_SEED` for reproducible sampling; `namespace`: a Temporal namespace (freshNamespace) instead of `default`.
 */
export async function writeExampleConfig(
  dir: string,
  run: Record<string, unknown> = {},
  more: Record<string, unknown> = {},
  options: { harnessEnv?: Record<string, string>; namespace?: string } = {},
): Promise<{ file: string; taskQueue: string; dataDir: string }> {
  mkdirSync(dir, { recursive: true });
  const taskQueue = `rein-${randomUUID()}`;
  const dataDir = path.join(dir, 'state');
  const program = (script: string, timeoutSeconds: number) => ({
    command: process.execPath,
    args: [path.join(exampleDir, script), '{task}', '{output}'],
    envAllow: ['PATH', 'HOME'],
    timeoutSeconds,
  });
  const config = {
    dataDir,
    log: { level: 'warn' },
    temporal: {
      address: inject('temporalAddress'),
      taskQueue,
      ...(options.namespace && { namespace: options.namespace }),
    },
    gateway: { port: await freePort() },
    policyServer: { port: await freePort() },
    harness: {
      version: 'calculator-agent-1',
      local: { ...program('harness.mjs', 60), ...(options.harnessEnv && { env: options.harnessEnv }) },
    },
    verifier: { ...program('verifier.mjs', 30), version: 'calculator-verifier-1' },
    run: {
      trainTasks: path.join(exampleDir, 'train.jsonl'),
      heldoutTasks: path.join(exampleDir, 'heldout.jsonl'),
      evalHarnessEnv: { AGENT_TEMPERATURE: '0' },
      ...run,
    },
    // As examples/calculator-agent/rein.yaml: the trained agent calls its calculator more.
    gate: { maxRegression: { tokens: 1.0, steps: 1.0, latency: null } },
    ...(await suiteStoreSettings()),
    ...more,
  };
  const file = path.join(dir, 'rein.json');
  writeFileSync(file, JSON.stringify(config, null, 2));
  return { file, taskQueue, dataDir };
}
