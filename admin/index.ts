// The admin deployable's public entry: the management API server, its configuration, the
// first-run bootstrap and the `spate admin` command line.
export { startAdmin, API_VERSION, type AdminDeps, type AdminHandle } from './server.js';
export { loadAdminConfig, adminConfigDefinition, adminConfigHelp, type AdminConfig } from './config.js';
export { bootstrapCluster, BOOTSTRAP_FILE, type BootstrapOptions, type BootstrapResult } from './bootstrap.js';
export { runAdminCli, ADMIN_USAGE, type CliIo } from './cli.js';
export { migrate, MIGRATIONS_TABLE } from './db/migrate.js';
export { adminErrors } from './errors.js';
export { ALL_SCOPES, SCOPE_OBJECTS } from './auth/scopes.js';
