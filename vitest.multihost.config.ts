// `npm run test:multihost`: the multi-host rig (test/multihost), hosts in network namespaces under
// faults. Needs root (namespaces, iptables, a tmpfs, cgroups); it runs dist/*/main.js, which it
// builds first. `npm test` runs it last.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/multihost/multihost.int.test.ts'],
    globalSetup: [],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
