import { createWriteStream, type WriteStream } from 'node:fs';

/**
 * A log file that keeps the first and the last `limit / 2` bytes of what is written to it: a
 * command that floods its output must not fill the disk (16 runs at once, each for its whole
 * timeout). The head is written as it arrives; the tail is held in memory until `close`.
 */
export class CappedLog {
  bytes = 0;
  truncatedBytes = 0;
  private readonly file: WriteStream;
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private headBytes = 0;
  private tail: Buffer[] = [];
  private tailBytes = 0;

  constructor(file: string, limit: number) {
    this.file = createWriteStream(file);
    this.file.on('error', () => undefined); // a log that cannot be written does not end the run
    this.headLimit = Math.ceil(limit / 2);
    this.tailLimit = limit - this.headLimit;
  }

  write(chunk: Buffer): void {
    this.bytes += chunk.length;
    const toHead = Math.min(chunk.length, this.headLimit - this.headBytes);
    if (toHead > 0) {
      this.file.write(chunk.subarray(0, toHead));
      this.headBytes += toHead;
    }
    if (toHead === chunk.length) return;
    this.tail.push(chunk.subarray(toHead));
    this.tailBytes += chunk.length - toHead;
    while (this.tail.length > 1 && this.tailBytes - (this.tail[0] as Buffer).length >= this.tailLimit) {
      this.tailBytes -= (this.tail.shift() as Buffer).length;
    }
  }

  close(done: () => void): void {
    const tail = Buffer.concat(this.tail);
    const kept = tail.subarray(Math.max(0, tail.length - this.tailLimit));
    this.truncatedBytes = this.bytes - this.headBytes - kept.length;
    if (this.truncatedBytes > 0) {
      this.file.write(
        `\n[rein: ${this.truncatedBytes} bytes cut here; this log keeps the first ${this.headBytes} and the last ${kept.length} bytes]\n`,
      );
    }
    this.file.end(kept, done);
  }
}
