export interface SseEvent {
  /** The event exactly as received, including its terminating blank line. */
  raw: string;
  /** Its data lines joined, or null for a comment / keep-alive. */
  data: string | null;
}

/**
 * Splits a text/event-stream into events as bytes arrive. Each piece is searched once: an event
 * of many megabytes costs one pass over its pieces, not one pass over all of it per piece.
 */
export class SseParser {
  /** The pieces of the event not yet ended. */
  private pending: string[] = [];
  /** Their last characters: the start of an event end ("\r\n\r\n" at most) split across pieces. */
  private tail = '';

  push(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    let rest = text;
    for (;;) {
      const probe = this.tail + rest;
      const match = /\r?\n\r?\n/.exec(probe);
      if (!match) {
        if (rest !== '') this.pending.push(rest);
        this.tail = probe.slice(-3);
        return events;
      }
      // No event end lies wholly in the pending pieces (it would have ended an event already), so this one ends in
      // `rest`.
      const end = match.index + match[0].length - this.tail.length;
      this.pending.push(rest.slice(0, end));
      const raw = this.pending.join('');
      events.push({ raw, data: dataOf(raw) });
      this.pending = [];
      this.tail = '';
      rest = rest.slice(end);
    }
  }

  /** Whatever arrived after the last complete event (non-empty means the stream was cut mid-event). */
  rest(): string {
    return this.pending.join('');
  }
}

function dataOf(raw: string): string | null {
  // Most events are one `data: …` line and the blank line that ends them.
  const firstBreak = raw.indexOf('\n');
  if (firstBreak === raw.length - 2 && raw.startsWith('data: ') && raw.charCodeAt(firstBreak - 1) !== 13)
    return raw.slice(6, firstBreak);
  const lines = raw.split(/\r?\n/).filter((line) => line.startsWith('data:'));
  if (lines.length === 0) return null;
  return lines.map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
}
