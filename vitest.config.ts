import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Two test files loading @temporalio/worker in worker threads segfault; forks do not.
    pool: 'forks',
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'workflows/**/*.test.ts', 'activities/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
