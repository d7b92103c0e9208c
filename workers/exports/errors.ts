// Why a run failed, as codes (docs/exports.md, "Failures"): each says whether trying again can
// help, and carries a message a person can act on ("AccessDenied on bucket x").
export const EXPORT_ERROR_CODES = {
  /** The destination refused our credentials or permissions. */
  access_denied: { retryable: false },
  /** The bucket, database, schema or URL does not exist. */
  not_found: { retryable: false },
  /** The configuration cannot work (bad value, unsupported format, table without the needed columns). */
  invalid_config: { retryable: false },
  /** The destination host is refused by the egress policy (EXPORT_EGRESS_ALLOW). */
  egress_refused: { retryable: false },
  /** The destination answered that the request itself is wrong (HTTP 4xx other than 408/429). */
  rejected: { retryable: false },
  /** The interval is older than what PROCESSED retains: exporting it would silently miss events. */
  older_than_retention: { retryable: false },
  /** A backfill run waited for the workers to process what was captured before it, and they are still behind. */
  workers_behind: { retryable: true },
  /** The destination is down, slow, overloaded or unreachable (network errors, 5xx, 429, timeouts). */
  unavailable: { retryable: true },
  /** NATS or the runner's own PostgreSQL failed meanwhile. */
  internal: { retryable: true },
} as const;

export type ExportErrorCode = keyof typeof EXPORT_ERROR_CODES;

export class ExportError extends Error {
  override name = 'ExportError';
  constructor(
    readonly code: ExportErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  get retryable(): boolean {
    return EXPORT_ERROR_CODES[this.code].retryable;
  }
}

/** The run was stopped from outside (export deleted, lease lost, shutdown): not a failure of the destination. */
export class RunStopped extends Error {
  override name = 'RunStopped';
  constructor(readonly reason: 'deleted' | 'lease_lost' | 'shutdown') {
    super(`run stopped: ${reason}`);
  }
}

export function asExportError(err: unknown): ExportError {
  if (err instanceof ExportError) return err;
  const message = err instanceof Error ? err.message : String(err);
  // Anything unclassified is taken to be of the moment: retried with back-off, then Failed.
  return new ExportError('unavailable', message, { cause: err });
}
