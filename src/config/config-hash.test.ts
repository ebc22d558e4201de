import { describe, expect, it } from 'vitest';
import { configHash } from './config-hash.js';
import { reinConfigSchema, type ReinConfig } from './schema.js';

const config = (input: object = {}): ReinConfig => reinConfigSchema.parse(input);

describe('configHash', () => {
  it('ignores what cannot change a replay, a batch or a decision', () => {
    const base = configHash(config());
    for (const input of [
      { log: { level: 'debug' } },
      { dataDir: '/elsewhere' },
      { storage: { minFreeMegabytes: 1 } },
      { gateway: { port: 9999, host: '0.0.0.0' } },
      { temporal: { address: 'temporal.example:7233', taskQueue: 'other' } },
      { policyServer: { port: 9001 } },
      { api: { port: 9002 } },
      { run: { iterations: 10, tasksPerIteration: 4 } },
      { rollouts: { concurrency: 2 } },
      { gate: { autoPromote: false } },
    ]) {
      expect(configHash(config(input)), JSON.stringify(input)).toBe(base);
    }
  });

  it('changes with what shapes rollouts, scores, samples and the gate', () => {
    const base = configHash(config());
    for (const input of [
      { rollouts: { rewardWeights: { exact: 2 } } },
      { rollouts: { hiddenFields: ['answer', 'solution'] } },
      { samples: { estimator: 'rloo' } },
      { gate: { acceptReward: 0.5 } },
      { run: { evalHarnessEnv: { TEMPERATURE: '0' } } },
      { run: { base: { version: 'v9' } } },
    ]) {
      expect(configHash(config(input)), JSON.stringify(input)).not.toBe(base);
    }
  });
});
