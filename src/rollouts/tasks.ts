import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { taskIdKey } from './rollout-id.js';

/** One task of a task set: an id plus whatever the harness and the verifier need. */
export interface Task {
  id: string;
  [field: string]: unknown;
}

export interface TaskSet {
  file: string;
  tasks: Task[];
  /** SHA-256 of the tasks as canonical JSON lines: the environment ledger's key for the set. */
  sha256: string;
}

/** Reads a JSONL task set; every line must be an object with a unique string `id`. */
export function loadTaskSet(file: string): TaskSet {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`task set ${file} cannot be read: ${(err as Error).message}`);
  }
  const tasks: Task[] = [];
  const seen = new Set<string>();
  const byKey = new Map<string, { id: string; line: number }>();
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new Error(
        `${file}:${i + 1}: not JSON (${(err as Error).message}); a task set holds one JSON object per line`,
      );
    }
    const id = (value as { id?: unknown } | null)?.id;
    if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof id !== 'string' || id === '') {
      throw new Error(`${file}:${i + 1}: a task must be a JSON object with a non-empty string "id"`);
    }
    if (seen.has(id)) throw new Error(`${file}:${i + 1}: task id "${id}" appears twice; task ids must be unique`);
    seen.add(id);
    const key = taskIdKey(id);
    const other = byKey.get(key);
    if (other) {
      throw new Error(
        `${file}:${i + 1}: task ids "${other.id}" (line ${other.line}) and "${id}" would share rollout ids (both become "${key}": characters other than letters, digits and . _ : - turn into _); rename one`,
      );
    }
    byKey.set(key, { id, line: i + 1 });
    tasks.push(value as Task);
  });
  if (tasks.length === 0) throw new Error(`task set ${file} holds no tasks`);
  return { file, tasks, sha256: taskSetHash(tasks) };
}

export function taskSetHash(tasks: readonly Task[]): string {
  return createHash('sha256')
    .update(tasks.map((t) => JSON.stringify(t)).join('\n'))
    .digest('hex');
}

/** The task as its harness sees it: the fields only the verifier may know are removed. */
export function harnessView(task: Task, hiddenFields: readonly string[]): Task {
  return Object.fromEntries(Object.entries(task).filter(([key]) => !hiddenFields.includes(key))) as Task;
}
