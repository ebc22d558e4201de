import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { packageRoot } from '../../src/package-root.js';

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

/** Where test/integration/replay.test.ts finds the histories it replays. */
export const HISTORIES = path.resolve(import.meta.dirname, '../fixtures/histories');

/** Whether this test run records histories anew (`npm run record:histories`). */
export const recordingHistories = process.env.REIN_RECORD_HISTORIES === '1';

/**
 * Keeps a history for replay.test.ts, with the machine's paths in its JSON payloads (the checkout,
 * the temporary folder) written as /rein and /tmp: a fixture should not depend on where it was
 * recorded, and replay never reads them.
 */
export function recordHistory(history: History, name: string): void {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  const scrub = (text: string) => text.replaceAll(packageRoot(), '/rein').replaceAll(os.tmpdir(), '/tmp');
  for (const event of history.events ?? []) {
    for (const attributes of Object.values(event))
      visitPayloads(attributes, (payload) => {
        if (payload.data) payload.data = encoder.encode(scrub(decoder.decode(payload.data)));
      });
  }
  writeFileSync(path.join(HISTORIES, name), `${historyToJSON(history)}\n`);
}

/** Calls `visit` on every payload ({metadata, data}) under a history event's attributes. */
function visitPayloads(value: unknown, visit: (payload: { data?: Uint8Array | null }) => void, depth = 0): void {
  if (typeof value !== 'object' || value === null || depth > 12 || value instanceof Uint8Array) return;
  if ('metadata' in value && 'data' in value && (value as { data: unknown }).data instanceof Uint8Array)
    return visit(value as { data: Uint8Array });
  for (const child of Object.values(value)) visitPayloads(child, visit, depth + 1);
}
