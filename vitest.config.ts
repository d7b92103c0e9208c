import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**', '.data/**', 'test/faults/**', 'test/multihost/multihost.int.test.ts'],
    globalSetup: ['test/kit/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: running more files at once only makes the real servers starve each other.
    maxWorkers: 2,
  },
});
