import { open, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ArtifactNameError, type ArtifactStore } from '../artifacts/artifact-store.js';
import { redactText, type RedactionRule } from '../gateway/redact.js';

/**
 * A rollout's logs (the harness's, one per attempt, and the verifier's) are written on the
 * worker's disk while they run, then uploaded to the artifact store, redacted, under
 * `rollouts/<rolloutId>/`: the API and the console read them there from any host, and the
 * worker's disk is nobody else's.
 */
export const ROLLOUT_LOG_FILE = /^harness-\d+\.log$|^verifier\.log$/;

/** Where a rollout's uploaded logs live in the artifact store. */
export const rolloutLogsPrefix = (rolloutId: string): string => `rollouts/${rolloutId}/`;

/** The harness's log first, by attempt, then the verifier's. */
export const logOrder = (name: string): number =>
  name === 'verifier.log' ? Number.MAX_SAFE_INTEGER : Number(/\d+/.exec(name)?.[0] ?? 0);

/** An uploaded log keeps its last 4 MiB: one runaway harness cannot fill the bucket. */
export const UPLOADED_LOG_LIMIT_BYTES = 4 * 1024 * 1024;

/**
 * How much of a local log is read to redact. The local log is already capped (8 MiB, see
 * process.ts); redacting more than is uploaded means a cut never splits a secret, only a mark.
 */
const READ_LIMIT_BYTES = 16 * 1024 * 1024;

/** The first line of an uploaded log that was cut; the reader adds the count to what it left out. */
const CUT_NOTE = /^\[rein: the first (\d+) bytes of this log were cut[^\n]*\n/;
const cutNote = (cut: number, kept: number) =>
  `[rein: the first ${cut} bytes of this log were cut before upload; it keeps the last ${kept}]\n`;

/** An uploaded log's text without its cut note, and how many bytes the upload cut. */
export function uploadedLogText(text: string): { text: string; cutBytes: number } {
  const note = CUT_NOTE.exec(text);
  return note ? { text: text.slice(note[0].length), cutBytes: Number(note[1]) } : { text, cutBytes: 0 };
}

/** The event a worker appends when a log could not be uploaded: the console says so, and where the log stayed. */
export const LOG_NOT_UPLOADED_EVENT = 'log_not_uploaded';

export interface LogUploadSettings {
  artifacts: ArtifactStore;
  /** The gateway's redaction rules (gateway.redact): a log is redacted as the journal is. */
  redaction: readonly RedactionRule[];
  /** Default UPLOADED_LOG_LIMIT_BYTES. */
  limitBytes?: number;
  /** The pauses before each try after the first (default 0.5 s, then 2 s): a remote store's hiccup passes. */
  retryDelaysMs?: readonly number[];
}

const DEFAULT_RETRY_DELAYS_MS = [500, 2000];

/**
 * Uploads one local log of a rollout, redacted and cut to its last `limitBytes`. Never throws:
 * a failure is an answer (the rollout goes on; the local file stays). Null when there is no log.
 */
export async function uploadRolloutLog(
  settings: LogUploadSettings,
  rolloutId: string,
  file: string,
): Promise<{ uri: string } | { error: string } | null> {
  return uploadLog(settings, `${rolloutLogsPrefix(rolloutId)}${path.basename(file)}`, file);
}

/** Uploads a local log under `name`, as uploadRolloutLog does (redacted, cut, retried; never throws). */
export async function uploadLog(
  settings: LogUploadSettings,
  name: string,
  file: string,
): Promise<{ uri: string } | { error: string } | null> {
  let text: string | null;
  try {
    text = await redactedTail(file, settings.redaction, settings.limitBytes ?? UPLOADED_LOG_LIMIT_BYTES);
  } catch (err) {
    return { error: `could not read ${file}: ${(err as Error).message}` };
  }
  if (text === null) return null;
  const delays = settings.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return { uri: (await settings.artifacts.put(name, text)).uri };
    } catch (err) {
      if (attempt >= delays.length || !worthRetrying(err))
        return { error: `${settings.artifacts.url}: ${(err as Error).message}` };
      await sleep(delays[attempt]);
    }
  }
}

export interface LogFollower {
  stop(final?: boolean): Promise<void>;
}

/**
 * Uploads a log that is still being written every `everyMs` while it grows, so the console shows a running stage's
 * log from any host; `stop` ends the following, uploading the finished log when asked (`final`). A failed upload is
 * tried again at the next tick.
 */
export function followLog(settings: LogUploadSettings, name: string, file: string, everyMs = 3000): LogFollower {
  let uploadedSize = -1;
  let running: Promise<unknown> = Promise.resolve();
  const tick = async () => {
    const size = await stat(file).then(
      (s) => s.size,
      () => -1,
    );
    if (size < 0 || size === uploadedSize) return;
    const result = await uploadLog({ ...settings, retryDelaysMs: [] }, name, file);
    if (result && 'uri' in result) uploadedSize = size;
  };
  const timer = setInterval(() => {
    running = running.then(tick, tick);
  }, everyMs);
  timer.unref();
  return {
    async stop(final = false) {
      clearInterval(timer);
      await running.catch(() => undefined);
      if (final) await uploadLog(settings, name, file);
    },
  };
}

/** A refusal (a bad name; S3's 4xx: no such bucket, access denied) is the same on every try. */
function worthRetrying(err: unknown): boolean {
  return !(err instanceof ArtifactNameError) && (err as { $fault?: string }).$fault !== 'client';
}

/**
 * The log's redacted text, its start cut (at a line) to `limit` bytes with a note; null when the file does not exist.
 */
async function redactedTail(file: string, rules: readonly RedactionRule[], limit: number): Promise<string | null> {
  const handle = await open(file, 'r').catch((err: unknown) =>
    (err as NodeJS.ErrnoException).code === 'ENOENT' ? null : Promise.reject(err),
  );
  if (!handle) return null;
  let raw: Buffer;
  let unread: number;
  try {
    const size = (await handle.stat()).size;
    const length = Math.min(size, READ_LIMIT_BYTES);
    raw = Buffer.alloc(length);
    await handle.read(raw, 0, length, size - length);
    unread = size - length;
  } finally {
    await handle.close();
  }
  const redacted = Buffer.from(redactText(raw.toString('utf8'), rules));
  if (unread === 0 && redacted.length <= limit) return redacted.toString('utf8');
  // Cut at a line: the kept part starts whole, and a redaction mark is never split.
  let start = redacted.length - Math.min(limit, redacted.length);
  const newline = start === 0 && unread === 0 ? -1 : redacted.indexOf(0x0a, start);
  if (newline !== -1 && newline < redacted.length - 1) start = newline + 1;
  const kept = redacted.subarray(start);
  return cutNote(unread + start, kept.length) + kept.toString('utf8');
}
