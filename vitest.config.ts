import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two test files loading @temporalio/worker in worker threads segfault; forks do not.
    pool: 'forks',
    // Most integration tests wait on child processes, HTTP and Temporal rather than the CPU: one
    // file more than there are cores (measured on 2 cores: 2 files at a time 632 s for the suite,
    // 3 files 542 s, nothing flaky; docs/ci-timing.md has the table).
    maxWorkers: Math.min(4, os.availableParallelism() + 1),
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'workflows/**/*.test.ts', 'activities/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
