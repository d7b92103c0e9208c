// The worker's error registry: its only HTTP surface is /metrics, /_health and /_ready.
import { defineErrors, errorMapper } from '../../lib/index.js';

export const workerErrors = defineErrors({
  not_found: { status: 404, type: 'invalid_request', detail: 'Not found. The worker serves /metrics, /_health and /_ready.' },
  method_not_allowed: { status: 405, type: 'invalid_request', detail: 'Only GET and HEAD are served.' },
  not_ready: { status: 503, type: 'server_error', detail: 'The worker is not ready yet (or is stopping).' },
});

export type WorkerErrorCode = keyof typeof workerErrors;

export const toWorkerErrorResponse = errorMapper(workerErrors);
