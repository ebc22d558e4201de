import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two test files loading @temporalio/worker in worker threads segfault; forks do not.
    pool: 'forks',
    // Most integration tests wait on child processes, HTTP and Temporal rather than the CPU: two
    // files at a time even on two cores (measured: 392 s → 281 s for the suite, nothing flaky).
    maxWorkers: Math.min(4, Math.max(2, os.availableParallelism() - 1)),
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'workflows/**/*.test.ts', 'activities/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
