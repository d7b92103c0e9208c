// Entry point of a worker process (`node dist/workers/main.js`): the shared start-up shell
// (lib/process-shell.ts) around startWorker.
import { runDeployable } from '../lib/index.js';
import { loadWorkerConfig, startWorker, workerHelp, type WorkerFaults } from './index.js';

await runDeployable({
  name: 'worker',
  help: workerHelp,
  loadConfig: loadWorkerConfig,
  start: (config, { log }) => startWorker(config, { logger: log, faults: testFaults(process.env.SPATE_TEST_FAULT) }),
});

/**
 * Fault injection for the process tests only (never set in production):
 * `kill-after-publish:N` kills this process with SIGKILL right after its Nth batch is published
 * and before it commits, the worst moment for exactly-once.
 */
function testFaults(spec: string | undefined): WorkerFaults | undefined {
  const m = /^kill-after-publish:(\d+)$/.exec(spec ?? '');
  if (!m) return undefined;
  let left = Number(m[1]);
  return {
    afterPublish: () => {
      if (--left === 0) process.kill(process.pid, 'SIGKILL');
    },
  };
}
