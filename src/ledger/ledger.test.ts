import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { rolloutFactsOf } from '../gate/rollout-facts.js';
import { newEventSchema, type Rollout, type RolloutEvent } from '../rollouts/rollout.js';
import type { CallRecord } from '../store/trace-store.js';
import { ledgerChanges, ledgerMetrics, type LedgerKeys } from './ledger.js';
import { SqliteLedger } from './sqlite-ledger.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-ledger-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rollout = (over: Partial<Rollout> = {}): Rollout => ({
  id: 'b.t1.0', taskId: 't1', mode: 'eval', status: 'succeeded', statusReason: null, attempts: 1, keyless: false, policyVersion: 'v1',
  failureClass: null, metadata: { sample: 0 }, createdAt: '', updatedAt: '', ...over,
});
const call = (attempt: number, startedAt: number, latencyMs: number, tokens: number) =>
  ({ id: `c${startedAt}`, rolloutId: 'b.t1.0', attempt, seq: 1, status: 'ok', startedAt, latencyMs, usage: { prompt_tokens: tokens - 10, completion_tokens: 10 } }) as unknown as CallRecord;
const event = (type: RolloutEvent['type'], source: RolloutEvent['source'], payload: Record<string, unknown>) => ({ id: 0, rolloutId: 'b.t1.0', attempt: 1, type, source, actionId: null, payload, at: '' }) as RolloutEvent;

describe('rollout facts and ledger metrics', () => {
  it('reads outcome, cost, retries, tool errors, interventions and reward disagreement from the journal', () => {
    const facts = rolloutFactsOf(
      rollout({ attempts: 2, metadata: { sample: 3 } }),
      [call(1, 1000, 50, 100), call(2, 2000, 100, 120), call(2, 2200, 300, 130)],
      [
        event('span', 'rollout', { name: 'calc', failure: 'bad input' }),
        event('intervention', 'rollout', { reason: 'a person approved the refund' }),
        event('reward', 'rollout', { value: 1 }),
        event('reward', 'admin', { value: 0 }),
      ],
    );
    expect(facts).toMatchObject({ taskId: 't1', sample: 3, reward: 0, tokens: 350, steps: 3, latencyMs: 500, attempts: 2, toolErrors: 1, interventions: 1, rewardDisagrees: true });
  });

  it('sums a set of rollouts into one ledger row, irreversible failures counted apart', () => {
    const base = rolloutFactsOf(rollout(), [call(1, 0, 10, 100)], [event('reward', 'admin', { value: 1 })]);
    const metrics = ledgerMetrics([base, { ...base, reward: 0.5, attempts: 3 }, { ...base, reward: 0, status: 'failed', failureClass: 'irreversible' }], 1, 12.5);
    expect(metrics).toEqual({ rollouts: 3, unscored: 0, acceptedRate: 1 / 3, tokens: 300, elapsedSeconds: 12.5, toolErrors: 0, retries: 2, interventions: 0, irreversibleFailures: 1 });
  });

  it('leaves rollouts lost to a fault out of the accepted rate, and counts them', () => {
    const base = rolloutFactsOf(rollout(), [call(1, 0, 10, 100)], [event('reward', 'admin', { value: 1 })]);
    const lost = { ...base, reward: null, status: 'failed' as const, failureClass: 'infrastructure' as const };
    expect(ledgerMetrics([base, { ...base, reward: 0 }, lost, lost], 1, 1)).toMatchObject({ rollouts: 4, unscored: 2, acceptedRate: 0.5 });
  });

  it('takes human interventions as an event type harnesses post', () => {
    expect(newEventSchema.parse({ type: 'intervention', reason: 'took over the chat', by: 'agent-42' })).toEqual({ type: 'intervention', reason: 'took over the chat', by: 'agent-42' });
    expect(() => newEventSchema.parse({ type: 'intervention' })).toThrow();
  });
});

describe('the ledgers', () => {
  const keys = (over: Partial<{ policy: string; harness: string; taskSet: string }> = {}): LedgerKeys => ({
    model: { policyVersion: over.policy ?? 'v1', parent: 'v0' },
    harness: { version: over.harness ?? 'h-1' },
    environment: { taskSet: over.taskSet ?? 'ts1', verifier: 'ver@1', config: 'c1' },
  });

  it('says which of model, harness and environment changed between two entries', () => {
    expect(ledgerChanges(keys(), keys({ policy: 'v2' }))).toEqual({ model: [{ field: 'policyVersion', from: 'v1', to: 'v2' }], harness: [], environment: [] });
    expect(ledgerChanges(keys(), keys({ harness: 'h-2', taskSet: 'ts2' }))).toMatchObject({ model: [], harness: [{ field: 'version' }], environment: [{ field: 'taskSet', from: 'ts1', to: 'ts2' }] });
  });

  it('records a row once per id and lists them by run', async () => {
    const ledger = new SqliteLedger(path.join(dir, 'registry.sqlite'));
    const metrics = ledgerMetrics([], 1, 1);
    const row = { id: 'r.it1', kind: 'iteration' as const, runId: 'r', iteration: 1, decisionId: null, batchIds: ['r.it1'], metrics, ...keys() };
    await ledger.record(row);
    await ledger.record({ ...row, metrics: { ...metrics, tokens: 999 } });
    await ledger.record({ ...row, id: 'other.it1', runId: 'other' });
    expect(await ledger.list({ runId: 'r' })).toEqual([expect.objectContaining({ id: 'r.it1', metrics: expect.objectContaining({ tokens: 0 }), model: { policyVersion: 'v1', parent: 'v0' } })]);
    expect(await ledger.list()).toHaveLength(2);
    await ledger.close();
  });
});
