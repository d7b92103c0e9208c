// `npm run test:faults`: the fault-survival suite, apart from the rest because it runs a whole
// cluster for a few minutes. `npm test` runs it after the main suite.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    globalSetup: [],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
