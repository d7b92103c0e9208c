// The ingest node: PostHog-compatible capture into JetStream.
export { startIngest, type IngestNode, type IngestDeps } from './ingest-node.js';
export { loadIngestConfig, ingestConfigDefinition, ingestHelp, type IngestConfig } from './config.js';
export { captureErrors, type CaptureErrorCode } from './errors.js';
export { DROP_REASONS, type DropReason } from './parse/index.js';
