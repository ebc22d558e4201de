import { describe, expect, it } from 'vitest';
import { parseExposition, valueOf } from '../../test/helpers/prometheus.js';
import { WorkerMetrics } from './worker-metrics.js';

describe('the trainer metrics a worker exposes', () => {
  it('are the numbers the trainer reported for the last update; one it did not report keeps its value', async () => {
    const metrics = new WorkerMetrics();
    metrics.policyUpdated({
      steps: 4,
      loss: 0.5,
      approxKl: 0.01,
      clipFraction: 0.2,
      entropy: 1.5,
      gradNorm: 0.9,
      seconds: 3,
    });
    metrics.policyUpdated({ steps: 2, loss: -0.25, approxKl: 0.02, clipFraction: 0.1, entropy: 1.25, gradNorm: 'n/a' });
    const samples = parseExposition(await metrics.registry.metrics());
    expect(valueOf(samples, 'rein_trainer_updates_total')).toBe(2);
    expect(valueOf(samples, 'rein_trainer_steps_total')).toBe(6);
    expect(valueOf(samples, 'rein_trainer_loss')).toBe(-0.25);
    expect(valueOf(samples, 'rein_trainer_approx_kl')).toBe(0.02);
    expect(valueOf(samples, 'rein_trainer_clip_fraction')).toBe(0.1);
    expect(valueOf(samples, 'rein_trainer_entropy')).toBe(1.25);
    expect(valueOf(samples, 'rein_trainer_grad_norm')).toBe(0.9);
  });
});

describe('the serving reconciler on /metrics', () => {
  it('shows what must be served and failed in the last pass, and counts the loads it made again', async () => {
    const metrics = new WorkerMetrics();
    const loaded = [{ version: 'r.v1', endpoints: ['http://a', 'http://b'] }];
    metrics.servingReconciled({ needed: ['r.v1', 'r.v2'], loaded, failed: [{ version: 'r.v2', reason: 'down' }] });
    metrics.servingReconciled({ needed: ['r.v1', 'r.v2'], loaded: [], failed: [] });
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^rein_serving_versions\{state="needed"\} 2$/m);
    expect(text).toMatch(/^rein_serving_versions\{state="failed"\} 0$/m);
    expect(text).toMatch(/^rein_serving_loads_total 2$/m);
  });
});
