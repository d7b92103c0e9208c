// What every batch-export destination is to the runner (docs/exports.md): one small typed
// interface, so S3, PostgreSQL, HTTP and NoOp are interchangeable and the runner alone decides
// what a run reads, when it runs and how often it is retried.
import type { BatchExportRecord } from '../../../lib/index.js';
import type { EventLines } from '../formats/event-lines.js';
import type { ExportRecord, PersonRecord } from '../records.js';

export const DESTINATION_TYPES = ['S3', 'Postgres', 'HTTP', 'NoOp'] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];

/** The run a writer delivers: the same values on every attempt of it (retries, reruns after a crash). */
export interface RunTarget {
  exportId: string;
  teamId: number;
  model: BatchExportRecord['model'];
  /** [start, end) of the run's data interval. */
  start: Date;
  end: Date;
  /** Set for the runs of a backfill (their files and ledger rows are apart from scheduled ones). */
  backfillId: string | null;
  /** Stable id of the run (a uuid derived from export, backfill and interval). */
  runId: string;
}

/** What a run delivered, as reported on its run record. */
export interface Delivered {
  records: number;
  /** Bytes sent after format and compression (S3: object bytes; PostgreSQL: COPY text; HTTP: request bodies). */
  bytes: number;
  /** Where it went, for the run's log (object keys, a table, requests sent). */
  detail: string;
}

/**
 * One attempt of one run. `write` is called with the run's records in stream order and returns
 * once the destination can take more (back-pressure: memory stays bounded); `commit` makes the
 * run's data visible exactly once; `abort` leaves nothing half-visible that a rerun would not
 * replace. A writer is used once.
 */
export interface DestinationWriter {
  writeEvents(records: readonly ExportRecord[]): Promise<void>;
  writePersons(records: readonly PersonRecord[]): Promise<void>;
  /**
   * Set by writers of JSONLines events (S3): they take the lines formatted in a thread
   * (formats/line-pool.ts) instead of records, each message's in stream order.
   */
  readonly writeEventLines?: (lines: EventLines) => Promise<void>;
  commit(): Promise<Delivered>;
  abort(reason: unknown): Promise<void>;
}

export interface Destination {
  readonly type: DestinationType;
  /**
   * A cheap check that the destination is there and accepts this export (credentials, bucket,
   * table, URL), run before every run, even one with nothing to deliver, so a broken destination
   * is reported at once rather than on the first busy interval.
   */
  check(signal: AbortSignal): Promise<void>;
  open(run: RunTarget, signal: AbortSignal): Promise<DestinationWriter>;
  /** Frees clients and connections. */
  close(): Promise<void>;
}
