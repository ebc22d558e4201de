import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');

/**
 * Rein at git `ref`, checked out into .bench/before, for benchmarks that measure before and after
 * in one run. It is inside this checkout, so its imports resolve to this checkout's node_modules.
 */
export function checkoutBefore(ref: string): string {
  const dir = path.join(root, '.bench', 'before');
  if (!existsSync(dir)) execFileSync('git', ['worktree', 'add', '--detach', dir, ref], { cwd: root, stdio: 'ignore' });
  else execFileSync('git', ['checkout', '--detach', '--force', ref], { cwd: dir, stdio: 'ignore' });
  return dir;
}
