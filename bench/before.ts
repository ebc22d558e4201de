import { execFileSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');

/**
 * Rein at git `ref`, checked out into .bench/before, for benchmarks that measure before and after
 * in one run. It is inside this checkout, so its imports resolve to this checkout's node_modules.
 */
export function checkoutBefore(ref: string): string {
  const dir = path.join(root, '.bench', 'before');
  // Resolved here: inside the worktree, HEAD would name the worktree's own commit.
  const commit = execFileSync('git', ['rev-parse', '--verify', `${ref}^{commit}`], {
    cwd: root,
    encoding: 'utf8',
  }).trim();
  if (!existsSync(dir))
    execFileSync('git', ['worktree', 'add', '--detach', dir, commit], { cwd: root, stdio: 'ignore' });
  else execFileSync('git', ['checkout', '--detach', '--force', commit], { cwd: dir, stdio: 'ignore' });
  // What setup built beside the checkout (the Node 20 SQLite driver, test servers) serves both trees.
  if (!existsSync(path.join(dir, '.tools')) && existsSync(path.join(root, '.tools')))
    symlinkSync(path.join(root, '.tools'), path.join(dir, '.tools'));
  return dir;
}
