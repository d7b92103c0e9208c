// Entry point of a worker process: `node dist/workers/main.js` (or --help for its settings).
import { ConfigError, createLogger } from '../lib/index.js';
import { loadWorkerConfig, startWorker, workerHelp, type WorkerFaults } from './index.js';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(workerHelp());
  process.exit(0);
}

const logger = createLogger('worker');
try {
  const worker = await startWorker(loadWorkerConfig(process.env), { logger, faults: testFaults(process.env.SPATE_TEST_FAULT) });
  let signals = 0;
  const shutdown = (signal: NodeJS.Signals) => {
    // A second signal means "now": skip the orderly shutdown.
    if (++signals > 1) process.exit(130);
    logger.info({ signal }, 'shutting down');
    worker.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
} catch (err) {
  if (err instanceof ConfigError) console.error(err.message);
  else logger.error({ err }, 'worker failed to start');
  process.exit(1);
}

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
