import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loggerFor } from './context.js';
import { prettyLine } from './pretty-log.js';

describe('logs on a terminal', () => {
  it('are lines a person reads: time, level, message, then the fields', () => {
    const line = JSON.stringify({
      level: 40,
      time: Date.UTC(2026, 11, 2, 12, 4, 31),
      pid: 1,
      hostname: 'h',
      name: 'rein',
      msg: 'gateway listening',
      url: 'http://127.0.0.1:8080',
      note: 'two words',
    });
    expect(prettyLine(line)).toBe('12:04:31 WARN  gateway listening  url=http://127.0.0.1:8080 note="two words"\n');
    expect(prettyLine('not json')).toBe('not json\n');
  });

  it('are pretty when stderr is a terminal and JSON lines otherwise', () => {
    const written = (tty: boolean) => {
      const err = Object.assign(new PassThrough(), { isTTY: tty });
      let text = '';
      err.on('data', (d: Buffer) => (text += d.toString()));
      loggerFor('info', err).info({ port: 1 }, 'hello');
      return text;
    };
    expect(written(true)).toMatch(/^\d\d:\d\d:\d\d INFO  hello {2}port=1\n$/);
    expect(JSON.parse(written(false))).toMatchObject({ msg: 'hello', port: 1 });
  });
});
