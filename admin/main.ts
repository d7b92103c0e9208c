// The admin server process: load config, start, stop cleanly on SIGINT/SIGTERM (a second
// signal exits at once).
import { ConfigError } from '../lib/index.js';
import { adminConfigHelp, loadAdminConfig, startAdmin } from './index.js';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(adminConfigHelp());
  process.exit(0);
}

let config;
try {
  config = loadAdminConfig();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(err.message);
  process.exit(2);
}

const admin = await startAdmin(config);
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(130);
    stopping = true;
    admin.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  });
}
