// `spate import`: the historical migration importer (ARCHITECTURE.md, "CLI").
export { runImportCli, parseImportArgs, batchUrlOf, IMPORT_USAGE, type ImportIo } from './cli.js';
export { Importer, projectHash, type ImportOptions, type ImportResult, type ImportObserver, type FileReport } from './importer.js';
export { eventUuidFactory, positionOfEventUuid } from './event-uuid.js';
export { laneOf } from './lanes.js';
