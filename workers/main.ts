// Entry point of a worker process (`node dist/workers/main.js`): the shared start-up shell
// (lib/process-shell.ts) around startWorker.
import { runDeployable } from '../lib/index.js';
import { loadWorkerConfig, shiftedClock, startWorker, workerHelp, type ExportFaults, type WorkerFaults } from './index.js';

// Tests only: the export runner's clock runs this far ahead, so an interval's end comes sooner.
const clockOffset = Number(process.env.SPATE_TEST_EXPORT_CLOCK_OFFSET_MS ?? 0);

await runDeployable({
  name: 'worker',
  help: workerHelp,
  loadConfig: loadWorkerConfig,
  start: (config, { log }) =>
    startWorker(config, {
      logger: log,
      faults: testFaults(process.env.SPATE_TEST_FAULT),
      exportFaults: exportTestFaults(process.env.SPATE_TEST_FAULT),
      exportClock: Number.isFinite(clockOffset) && clockOffset !== 0 ? shiftedClock(clockOffset) : undefined,
    }),
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

/** `kill-during-export:N`: SIGKILL once a run has handed N records to its destination, before it commits. */
function exportTestFaults(spec: string | undefined): ExportFaults | undefined {
  const m = /^kill-during-export:(\d+)$/.exec(spec ?? '');
  if (!m) return undefined;
  const at = Number(m[1]);
  return {
    afterWrite: (records) => {
      if (records >= at) process.kill(process.pid, 'SIGKILL');
    },
  };
}
