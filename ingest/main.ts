// Ingest node process: config from the environment, start, stop on SIGTERM/SIGINT
// (a second signal forces exit).
import { ConfigError, createLogger } from '../lib/index.js';
import { ingestHelp, loadIngestConfig, startIngest } from './index.js';

if (process.argv.includes('--help')) {
  console.log(ingestHelp());
  process.exit(0);
}

const log = createLogger('ingest');
try {
  const node = await startIngest(loadIngestConfig(), { log });
  let signals = 0;
  const shutdown = (signal: string) => {
    if (++signals > 1) process.exit(1);
    log.info({ signal }, 'stopping');
    node.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
} catch (err) {
  if (err instanceof ConfigError) console.error(err.message);
  else log.fatal({ err }, 'ingest node failed to start');
  process.exit(1);
}
