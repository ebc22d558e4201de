import { asyncLocalStorage, type Context } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import { eventLoopTurns, whileHeartbeating } from './heartbeat.js';

/** Just what keepHeartbeating uses of an activity's context: its heartbeat timeout and heartbeat(). */
function fakeContext(heartbeatTimeoutMs: number) {
  const beats: unknown[] = [];
  const context = {
    info: { heartbeatTimeoutMs },
    heartbeat: (details: unknown) => void beats.push(details),
  } as unknown as Context;
  return { context, beats };
}

/** Synchronous work for `ms`, in steps that await only settled promises (as SQLite reads behind an async API do). */
async function busy(ms: number, step: (done: number) => Promise<void>): Promise<number> {
  const end = Date.now() + ms;
  let done = 0;
  while (Date.now() < end) {
    await step(++done);
    for (let i = 0; i < 10_000; i++) Math.sqrt(i);
  }
  return done;
}

describe('whileHeartbeating', () => {
  it('heartbeats the latest progress during busy work that awaits eventLoopTurns, and stops when the work ends', async () => {
    const { context, beats } = fakeContext(600); // a beat every 200 ms
    let progress = 0;
    const turn = eventLoopTurns();
    const steps = await asyncLocalStorage.run(context, () =>
      whileHeartbeating(
        () =>
          busy(1000, async (done) => {
            progress = done;
            await turn();
          }),
        () => ({ done: progress }),
      ),
    );
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(beats.at(-1)).toMatchObject({ done: expect.any(Number) });
    expect((beats.at(-1) as { done: number }).done).toBeLessThanOrEqual(steps);
    const after = beats.length;
    await new Promise((r) => setTimeout(r, 450));
    expect(beats.length).toBe(after);
  });

  it('cannot heartbeat through busy work that never yields: why the stages await eventLoopTurns', async () => {
    const { context, beats } = fakeContext(600);
    await asyncLocalStorage.run(context, () => whileHeartbeating(() => busy(700, async () => {})));
    expect(beats).toEqual([]);
  });

  it('only runs the work outside an activity (a unit test calling the activity function)', async () => {
    await expect(whileHeartbeating(async () => 'done')).resolves.toBe('done');
  });
});
