import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { rolloutIdFor } from './rollout-id.js';
import { loadTaskSet } from './tasks.js';

const taskFile = (lines: string[]) => {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'rein-tasks-')), 'tasks.jsonl');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
};

describe('loadTaskSet', () => {
  it('refuses two task ids that would share rollout ids, naming both lines', () => {
    const file = taskFile(['{"id": "a_b"}', '{"id": "c"}', '{"id": "a b"}']);
    expect(rolloutIdFor('b', 'a b', 0)).toBe(rolloutIdFor('b', 'a_b', 0));
    expect(() => loadTaskSet(file)).toThrow(
      /tasks\.jsonl:3: task ids "a_b" \(line 1\) and "a b" would share rollout ids \(both become "a_b"/,
    );
  });

  it('keeps ids with other characters when they stay apart', () => {
    const set = loadTaskSet(taskFile(['{"id": "a b"}', '{"id": "a/c"}', '{"id": "naïve"}']));
    expect(set.tasks.map((t) => rolloutIdFor('b', t.id, 0))).toEqual(['b.a_b.0', 'b.a_c.0', 'b.na_ve.0']);
  });

  it('refuses a duplicated id and a line that is not a task', () => {
    expect(() => loadTaskSet(taskFile(['{"id": "x"}', '{"id": "x"}']))).toThrow(/:2: task id "x" appears twice/);
    expect(() => loadTaskSet(taskFile(['{"name": "x"}']))).toThrow(/non-empty string "id"/);
  });
});
