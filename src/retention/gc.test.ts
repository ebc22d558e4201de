import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { after, journaledRollout } from '../../test/helpers/journaled-rollout.js';
import { storeBackends, testStoreLocation } from '../../test/helpers/postgres.js';
import { LocalArtifactStore } from '../artifacts/local-store.js';
import { openRegistry } from '../registry/open.js';
import type { RolloutStatus } from '../rollouts/rollout.js';
import { openTraceStore } from '../store/open.js';
import type { JournalRetention, TraceStore } from '../store/trace-store.js';
import { fileURLToPath } from 'node:url';
import { collectGarbage } from './gc.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-gc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Store = TraceStore & JournalRetention;

const rollout = (store: Store, id: string, batchId: string | null, status?: RolloutStatus) =>
  journaledRollout(store, id, batchId, { status });

describe.each(storeBackends)('rein gc on the journal (%s)', (backend) => {
  it('deletes old finished rollouts, never one a trained version or a decision needs, an unfinished one or one of a batch in use; a dry run deletes nothing and says the same', async () => {
    const dataDir = path.join(dir, backend);
    const location = await testStoreLocation(backend, dataDir);
    const store = await openTraceStore(location, path.join(dataDir, 'traces.sqlite'));
    const registry = await openRegistry(location);
    try {
      // r1.v1 was trained on batch r1.it1; decision d compared replays heldout.v0 and r1.it1.heldout and names adhoc-2
      // in a check.
      await registry.register({
        version: 'v0',
        parent: null,
        runId: null,
        iteration: null,
        checkpointUri: '/base',
        batchContentHash: null,
        trainerMetrics: {},
      });
      await registry.register({
        version: 'r1.v1',
        parent: 'v0',
        runId: 'r1',
        iteration: 1,
        checkpointUri: '/c1',
        batchContentHash: 'h1',
        trainerMetrics: {},
      });
      await registry.saveDecision({
        id: 'd',
        candidate: 'r1.v1',
        incumbent: 'v0',
        verdict: 'pass',
        record: {
          candidate: { version: 'r1.v1', batchId: 'r1.it1.heldout', taskIds: ['a'], samplesPerTask: 1 },
          incumbent: { version: 'v0', batchId: 'heldout.v0', taskIds: ['a'], samplesPerTask: 1 },
          checks: [{ name: 'gain', passed: true, detail: '', rollouts: ['adhoc-2'] }],
        },
      });
      await rollout(store, 'r1.it1.a.0', 'r1.it1');
      await rollout(store, 'r1.it1.heldout.a.0', 'r1.it1.heldout');
      await rollout(store, 'heldout.v0.a.0', 'heldout.v0');
      await rollout(store, 'adhoc-1', null);
      await rollout(store, 'adhoc-2', null);
      await rollout(store, 'stuck', 'r2.it1', 'running');
      await rollout(store, 'r2.it2.a.0', 'r2.it2', 'failed');
      const lastOld = await rollout(store, 'r3.it1.a.0', 'r3.it1', 'cancelled');
      const cutoff = await after(lastOld);
      // Still going: r2.it2 has a rollout newer than the cutoff, so none of it goes.
      await rollout(store, 'r2.it2.b.0', 'r2.it2');
      await rollout(store, 'young', null);
      const options = { retention: { journal: '1m' }, now: cutoff + 60_000, batchSize: 2 };
      const deps = { store, registry, dataDir, artifactsDir: null };

      const dry = await collectGarbage(deps, { ...options, dryRun: true });
      expect(dry.journal?.delete).toMatchObject({ rollouts: 2, calls: 2, shadowCalls: 0 });
      expect(dry.journal?.delete.events).toBeGreaterThanOrEqual(2 * 3);
      expect(dry.journal?.delete.bytes).toBeGreaterThan(2 * 200);
      expect(dry.bytes).toBe(dry.journal?.delete.bytes);
      expect(dry.journal?.protected).toMatchObject({
        unfinished: { rollouts: 1, by: ['stuck'] },
        policyBatch: { rollouts: 1, by: ['r1.v1'] },
        decision: { rollouts: 3, by: ['d'] },
        batchInUse: { rollouts: 1, by: ['r2.it2'] },
      });
      expect(dry.journal?.oldestKept?.id).toBe('r1.it1.a.0');
      expect(dry.journal?.cutoff).toBe(new Date(cutoff).toISOString());
      expect(await store.getRollout('adhoc-1')).toBeDefined();

      const done = await collectGarbage(deps, { ...options, dryRun: false });
      expect(done.journal?.delete).toEqual(dry.journal?.delete);
      expect(done.journal?.protected).toEqual(dry.journal?.protected);
      for (const gone of ['adhoc-1', 'r3.it1.a.0']) {
        expect(await store.getRollout(gone)).toBeUndefined();
        expect(await store.listCalls(gone)).toEqual([]);
      }
      for (const kept of [
        'r1.it1.a.0',
        'r1.it1.heldout.a.0',
        'heldout.v0.a.0',
        'adhoc-2',
        'stuck',
        'r2.it2.a.0',
        'r2.it2.b.0',
        'young',
      ]) {
        expect(await store.listCalls(kept)).toHaveLength(1);
      }
      // Again: nothing more to do.
      expect((await collectGarbage(deps, { ...options, dryRun: false })).journal?.delete.rollouts).toBe(0);
      // Unset: the journal is kept whole, and not even read.
      expect(await collectGarbage({ dataDir, artifactsDir: null }, { retention: {}, dryRun: false })).toEqual({
        dryRun: false,
        journal: null,
        rolloutFolders: null,
        rolloutLogs: null,
        staging: null,
        bytes: 0,
      });
    } finally {
      await registry.close();
      await store.close();
    }
  });

  it("deletes a rollout's uploaded logs by its folder's rule and protections, those of rollouts run on other hosts too; a dry run counts their bytes", async () => {
    const dataDir = path.join(dir, `${backend}-logs`);
    const location = await testStoreLocation(backend, dataDir);
    const store = await openTraceStore(location, path.join(dataDir, 'traces.sqlite'));
    const registry = await openRegistry(location);
    // Where the workers upload logs (a bucket in production; a folder elsewhere here, as S3 is no local disk).
    const artifacts = new LocalArtifactStore(path.join(dir, `${backend}-logs-artifacts`));
    try {
      await registry.register({
        version: 'r1.v1',
        parent: null,
        runId: 'r1',
        iteration: 1,
        checkpointUri: '/c1',
        batchContentHash: 'h1',
        trainerMetrics: {},
      });
      // adhoc-1 ran here (a folder and uploaded logs); remote-1 on another worker (uploaded logs only).
      const logs = {
        'adhoc-1': 'harness-1 output\n',
        'remote-1': 'remote harness output\n',
        'r1.it1.a.0': 'trained on\n',
        stuck: 'still going\n',
        young: 'just now\n',
      };
      await rollout(store, 'adhoc-1', null);
      await rollout(store, 'remote-1', null);
      await rollout(store, 'r1.it1.a.0', 'r1.it1');
      await rollout(store, 'stuck', null, 'running');
      await rollout(store, 'young', null);
      for (const [id, text] of Object.entries(logs)) {
        await artifacts.put(`rollouts/${id}/harness-1.log`, text);
        await artifacts.put(`rollouts/${id}/verifier.log`, '{"components":{}}\n');
      }
      mkdirSync(path.join(dataDir, 'rollouts', 'adhoc-1'), { recursive: true });
      writeFileSync(path.join(dataDir, 'rollouts', 'adhoc-1', 'harness-1.log'), 'harness-1 output\n');
      // Not a rollout log: not Rein's to delete.
      await artifacts.put('rollouts/adhoc-1/notes.txt', 'mine');
      // Everything is older than the cutoff but young's logs, written after it.
      const now = Date.now() + 5 * 60_000;
      const later = new Date(now);
      for (const file of ['harness-1.log', 'verifier.log'])
        utimesSync(fileURLToPath(artifacts.uriOf(`rollouts/young/${file}`)), later, later);
      const deps = { store, registry, dataDir, artifactsDir: null, artifacts };
      const options = { retention: { rolloutFolders: '1m' }, now };
      const uploaded = (id: string) => artifacts.list(`rollouts/${id}/`);
      const doomedBytes = ['adhoc-1', 'remote-1'].reduce(
        (sum, id) => sum + Buffer.byteLength(logs[id as keyof typeof logs]) + '{"components":{}}\n'.length,
        0,
      );

      const dry = await collectGarbage(deps, { ...options, dryRun: true });
      expect(dry.rolloutLogs?.delete).toEqual({ rollouts: 2, objects: 4, bytes: doomedBytes });
      expect(dry.rolloutLogs?.protected).toMatchObject({
        unfinished: { rollouts: 1, by: ['stuck'] },
        policyBatch: { rollouts: 1, by: ['r1.v1'] },
      });
      expect(dry.bytes).toBe(doomedBytes + (dry.rolloutFolders?.delete.bytes ?? 0));
      expect(await uploaded('remote-1')).toHaveLength(2);

      const done = await collectGarbage(deps, { ...options, dryRun: false });
      expect(done.rolloutLogs?.delete).toEqual(dry.rolloutLogs?.delete);
      expect(existsSync(path.join(dataDir, 'rollouts', 'adhoc-1'))).toBe(false);
      expect(await uploaded('adhoc-1')).toEqual([artifacts.uriOf('rollouts/adhoc-1/notes.txt')]);
      expect(await uploaded('remote-1')).toEqual([]);
      for (const kept of ['r1.it1.a.0', 'stuck', 'young']) expect(await uploaded(kept)).toHaveLength(2);
      expect((await collectGarbage(deps, { ...options, dryRun: false })).rolloutLogs?.delete.objects).toBe(0);
    } finally {
      await registry.close();
      await store.close();
    }
  });

  it('deletes while a gateway journals through its own connection, which loses no call', async () => {
    const dataDir = path.join(dir, `${backend}-busy`);
    const location = await testStoreLocation(backend, dataDir);
    const gateway = await openTraceStore(location, path.join(dataDir, 'traces.sqlite'));
    const gc = await openTraceStore(location, path.join(dataDir, 'traces.sqlite'));
    const registry = await openRegistry(location);
    try {
      let last = 0;
      for (let i = 0; i < 30; i++) last = await rollout(gateway, `old-${i}`, null);
      const cutoff = await after(last);
      await gateway.createRollout({ id: 'live', taskId: 't' });
      let stop = false;
      const journaled = (async () => {
        let n = 0;
        while (!stop || n < 20) {
          const id = randomUUID();
          await gateway.beginCall({
            id,
            rolloutId: 'live',
            attempt: 1,
            endpoint: 'chat.completions',
            policyVersion: 'v1',
            backendUrl: 'http://b',
            stream: false,
            requestReceived: { n },
            requestSent: { n },
            startedAt: Date.now(),
          });
          await gateway.finishCall(id, {
            response: {},
            promptIds: [n],
            choices: [{ completionIds: [1], logprobs: [-1], finishReason: 'stop' }],
            usage: null,
            upstreamStatus: 200,
            errorClass: null,
            errorMessage: null,
            ttftMs: 1,
            latencyMs: 1,
          });
          n++;
        }
        return n;
      })();
      const report = await collectGarbage(
        { store: gc, registry, dataDir, artifactsDir: null },
        { retention: { journal: '1m' }, now: cutoff + 60_000, batchSize: 4, dryRun: false },
      );
      stop = true;
      const calls = await journaled;
      expect(report.journal?.delete.rollouts).toBe(30);
      expect((await gateway.listRollouts({ limit: 100 })).items.map((r) => r.id)).toEqual(['live']);
      const live = await gateway.listCalls('live');
      expect(live.map((c) => c.seq)).toEqual(Array.from({ length: calls }, (_, i) => i + 1));
      expect(live.every((c) => c.status === 'ok')).toBe(true);
    } finally {
      await registry.close();
      await gc.close();
      await gateway.close();
    }
  });
});
