import { StringDecoder } from 'node:string_decoder';
import { redactText, type RedactionRule } from '../gateway/redact.js';

/** Where redacted output goes: the capped log file. */
interface LogSink {
  write(chunk: Buffer): void;
  close(done: () => void): void;
}

/** A PEM block held back whole past this many characters is written as it stands (a log is not a vault). */
const HOLD_LIMIT_CHARS = 64 * 1024;
/** A line longer than this is redacted and written without waiting for its end. */
const LINE_LIMIT_CHARS = 64 * 1024;

/**
 * Redacts a command's output before it reaches the disk, as the journal is: whole lines at a time,
 * so a secret split across two reads is still found. A private key spans lines: from its BEGIN
 * marker the lines are held until its END marker arrives (or the hold limit), then redacted together.
 * Rules written to span lines in other ways are applied when the log is uploaded.
 */
export class RedactingLog implements LogSink {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';

  constructor(
    private readonly sink: LogSink,
    private readonly rules: readonly RedactionRule[],
  ) {}

  write(chunk: Buffer): void {
    this.pending += this.decoder.write(chunk);
    const end = this.pending.lastIndexOf('\n') + 1;
    const ready = end > 0 ? end : this.pending.length > LINE_LIMIT_CHARS ? this.pending.length : 0;
    if (ready === 0) return;
    const held = this.openKeyAt(this.pending.slice(0, ready));
    const cut = held === -1 || ready - held > HOLD_LIMIT_CHARS ? ready : held;
    if (cut === 0) return;
    this.emit(this.pending.slice(0, cut));
    this.pending = this.pending.slice(cut);
  }

  close(done: () => void): void {
    this.emit(this.pending + this.decoder.end());
    this.pending = '';
    this.sink.close(done);
  }

  /** Where a private key begins whose end has not arrived yet; -1 when none is open. */
  private openKeyAt(text: string): number {
    const begin = text.lastIndexOf('-----BEGIN ');
    if (begin === -1 || text.indexOf('-----END ', begin) !== -1) return -1;
    return begin;
  }

  private emit(text: string): void {
    if (text !== '') this.sink.write(Buffer.from(redactText(text, this.rules)));
  }
}
