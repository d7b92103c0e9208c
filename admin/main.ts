// The admin server process: the shared start-up shell (lib/process-shell.ts) around startAdmin.
import { runDeployable } from '../lib/index.js';
import { adminConfigHelp, loadAdminConfig, startAdmin } from './index.js';

await runDeployable({
  name: 'admin',
  help: adminConfigHelp,
  loadConfig: loadAdminConfig,
  start: (config, { log }) => startAdmin(config, { logger: log }),
});
