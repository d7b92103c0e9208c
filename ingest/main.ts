// Ingest node process: the shared start-up shell (lib/process-shell.ts) around startIngest.
import { runDeployable } from '../lib/index.js';
import { ingestHelp, loadIngestConfig, startIngest } from './index.js';

// Small buffers (a single event's line, its message) come from Node's shared pool; refilling an
// 8 KiB pool every dozen requests cost ~6% of parsing a single event (measured 2026-11-26), so
// the pool is 64 KiB here. A buffer up to half of it is still a slice of one.
Buffer.poolSize = 64 * 1024;

await runDeployable({ name: 'ingest', help: ingestHelp, loadConfig: loadIngestConfig, start: startIngest });
