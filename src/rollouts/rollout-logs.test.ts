import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { ArtifactStore } from '../artifacts/artifact-store.js';
import { LocalArtifactStore } from '../artifacts/local-store.js';
import { DEFAULT_REDACTION_RULES, redactionRules } from '../gateway/redact.js';
import { followLog, uploadedLogText, uploadRolloutLog } from './rollout-logs.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'rein-rollout-logs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const OPENAI_KEY = `sk-${'a1B2'.repeat(8)}`;
let stores = 0;
const freshStore = () => new LocalArtifactStore(path.join(dir, `artifacts-${stores++}`));
const logFile = (name: string, text: string) => {
  // A folder per store, as a rollout's folder: the file keeps the name it is uploaded under.
  mkdirSync(path.join(dir, `logs-${stores}`), { recursive: true });
  const file = path.join(dir, `logs-${stores}`, name);
  writeFileSync(file, text);
  return file;
};

describe('uploading a rollout log', () => {
  it('puts the log under rollouts/<id>/ redacted by the default rules and the configured ones; the local file is left as it was', async () => {
    const store = freshStore();
    const text = `starting\nusing key ${OPENAI_KEY} for the tool\ninternal ticket TICKET-4411 opened\ndone\n`;
    const file = logFile('harness-1.log', text);
    const redaction = redactionRules([{ name: 'ticket', regex: String.raw`TICKET-\d+` }], true);
    const uploaded = await uploadRolloutLog({ artifacts: store, redaction }, 'b.t.0', file);
    expect(uploaded).toEqual({ uri: store.uriOf('rollouts/b.t.0/harness-1.log') });
    const stored = readFileSync(fileURLToPath(store.uriOf('rollouts/b.t.0/harness-1.log')), 'utf8');
    expect(stored).toBe(
      'starting\nusing key [REDACTED:openai-key] for the tool\ninternal ticket [REDACTED:ticket] opened\ndone\n',
    );
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('keeps only the last part of a huge log, from a line start, with a note of how much was cut that the reader takes back out', async () => {
    const store = freshStore();
    const lines = Array.from({ length: 2000 }, (_, i) => `line ${String(i).padStart(4, '0')} ${OPENAI_KEY}`);
    const file = logFile('verifier.log', `${lines.join('\n')}\n`);
    await uploadRolloutLog({ artifacts: store, redaction: DEFAULT_REDACTION_RULES, limitBytes: 10_000 }, 'b.t.0', file);
    const stored = readFileSync(fileURLToPath(store.uriOf('rollouts/b.t.0/verifier.log')), 'utf8');
    const { text, cutBytes } = uploadedLogText(stored);
    expect(stored.startsWith(`[rein: the first ${cutBytes} bytes of this log were cut before upload`)).toBe(true);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(10_000);
    expect(text.startsWith('line ')).toBe(true);
    expect(text.endsWith('line 1999 [REDACTED:openai-key]\n')).toBe(true);
    // What was cut and what was kept make up the whole redacted log.
    const whole = `${lines.map((l) => l.replace(OPENAI_KEY, '[REDACTED:openai-key]')).join('\n')}\n`;
    expect(cutBytes + Buffer.byteLength(text)).toBe(Buffer.byteLength(whole));
    expect(whole.endsWith(text)).toBe(true);
  });

  it('tries again after a failed write, and answers an error (never throws) when every try fails', async () => {
    const store = freshStore();
    const file = logFile('harness-2.log', 'hello\n');
    let failures = 1;
    // The real store, whose first write fails as a remote store's can.
    const flaky: ArtifactStore = Object.assign(Object.create(store) as ArtifactStore, {
      put: (name: string, bytes: Buffer | string) =>
        failures-- > 0 ? Promise.reject(new Error('connection reset')) : store.put(name, bytes),
    });
    expect(await uploadRolloutLog({ artifacts: flaky, redaction: [], retryDelaysMs: [0] }, 'b.t.1', file)).toEqual({
      uri: store.uriOf('rollouts/b.t.1/harness-2.log'),
    });
    failures = 5;
    expect(await uploadRolloutLog({ artifacts: flaky, redaction: [], retryDelaysMs: [0, 0] }, 'b.t.2', file)).toEqual({
      error: `${store.url}: connection reset`,
    });
    expect(failures).toBe(2);
  });

  it('uploads nothing for a log that was never written', async () => {
    expect(
      await uploadRolloutLog({ artifacts: freshStore(), redaction: [] }, 'b.t.0', path.join(dir, 'no-such.log')),
    ).toBeNull();
  });
});

describe('following a log while it is written', () => {
  it('uploads it, redacted, each time it grew; the final upload on stop holds the whole log', async () => {
    const store = freshStore();
    const file = logFile('update.log', 'step 1\n');
    const read = () => readFileSync(fileURLToPath(store.uriOf('runs/r/iterations/1/update.log')), 'utf8');
    const follower = followLog(
      { artifacts: store, redaction: DEFAULT_REDACTION_RULES },
      'runs/r/iterations/1/update.log',
      file,
      20,
    );
    await vi.waitFor(() => expect(read()).toBe('step 1\n'));
    appendFileSync(file, `step 2 with ${OPENAI_KEY}\n`);
    await vi.waitFor(() => expect(read()).toBe('step 1\nstep 2 with [REDACTED:openai-key]\n'));
    appendFileSync(file, 'done\n');
    await follower.stop(true);
    expect(read()).toBe('step 1\nstep 2 with [REDACTED:openai-key]\ndone\n');
  });
});
