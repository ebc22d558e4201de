import { describe, expect, it } from 'vitest';
import { parseExposition, valueOf } from '../../test/helpers/prometheus.js';
import { PolicyServerMetrics } from './policy-server-metrics.js';

const depth = async (metrics: PolicyServerMetrics) =>
  valueOf(parseExposition(await metrics.registry.metrics()), 'rein_policy_server_queue_depth');

describe('the policy server queue depth', () => {
  it('counts each row from queued to finished or failed, and hands its promise back as it was', async () => {
    const metrics = new PolicyServerMetrics();
    let finish!: (state: { ids: number[] }) => void;
    let fail!: (err: Error) => void;
    const a = metrics.row(3, new Promise<{ ids: number[] }>((resolve) => (finish = resolve)));
    const b = metrics.row(3, new Promise<{ ids: number[] }>((_, reject) => (fail = reject)));
    expect(await depth(metrics)).toBe(2);
    finish({ ids: [1, 2] });
    expect(await a).toEqual({ ids: [1, 2] });
    expect(await depth(metrics)).toBe(1);
    fail(new Error('generation failed'));
    await expect(b).rejects.toThrow('generation failed');
    expect(await depth(metrics)).toBe(0);
    const samples = parseExposition(await metrics.registry.metrics());
    expect(valueOf(samples, 'rein_policy_server_generated_tokens_total')).toBe(2);
    expect(valueOf(samples, 'rein_policy_server_prompt_tokens_total')).toBe(3);
  });
});
