// Ingest node process: the shared start-up shell (lib/process-shell.ts) around startIngest.
import { runDeployable } from '../lib/index.js';
import { ingestHelp, loadIngestConfig, startIngest } from './index.js';

await runDeployable({ name: 'ingest', help: ingestHelp, loadConfig: loadIngestConfig, start: startIngest });
