// What a run delivers, fixed before it delivers anything (docs/exports.md, "What a run reads"):
//
// - a scheduled run of [start, end) reads the project's PROCESSED messages stored in it, as
//   stream sequences [firstSeq, lastSeq]: it goes on from the previous scheduled run's lastSeq
//   when it starts where that one ended, so no event falls between two runs or into both,
//   whatever the clocks say; late events land in the run during which they arrived;
// - a backfill run of [start, end) reads from the first message stored at start − skew to the
//   stream's end and keeps the events whose `timestamp` is in [start, end);
// - each leaves out what completed runs of the other kind delivered: a backfill skips the
//   sequence ranges of completed scheduled runs, and a scheduled run skips the events a
//   completed backfill run took (its range and its timestamps). Runs of an export run one at a
//   time, so this is exact: no event reaches a destination through both (PostHog #27699).
//
// A plan is stored with its run: a retry or a rerun after a crash reads exactly the same.
import { ExportError } from './errors.js';
import type { ProcessedStream } from './processed-stream.js';
import type { ExportRecord } from './records.js';
import type { RunStore, ScheduleState, StoredRun } from './run-store.js';

export type RunPlan =
  | {
      kind: 'events';
      mode: 'arrival';
      firstSeq: number;
      lastSeq: number;
      /** Events taken by completed backfill runs: seq in [firstSeq, lastSeq] and timestamp in [startUs, endUs). */
      exclude: Array<{ firstSeq: number; lastSeq: number; startUs: number; endUs: number }>;
    }
  | {
      kind: 'events';
      mode: 'timestamp';
      firstSeq: number;
      lastSeq: number;
      startUs: number;
      endUs: number;
      /** Ranges of completed scheduled runs. */
      exclude: Array<{ firstSeq: number; lastSeq: number }>;
    }
  | { kind: 'persons'; fromMs: number | null; toMs: number };

/** The runner's time: real time, or shifted for tests (a test clock that reaches an interval's end sooner). */
export interface ExportClock {
  now(): number;
  /** The real time of a schedule time (for stream times and database times). */
  toReal(t: number): number;
}

export function shiftedClock(offsetMs: number): ExportClock {
  return { now: () => Date.now() + offsetMs, toReal: (t) => t - offsetMs };
}

function retentionError(what: string, fromMs: number, firstTimeMs: number | undefined): ExportError {
  const kept = firstTimeMs === undefined ? 'nothing' : `events stored from ${new Date(firstTimeMs).toISOString()} on`;
  return new ExportError(
    'older_than_retention',
    `${what} starts at ${new Date(fromMs).toISOString()}, older than what PROCESSED retains (${kept}; STREAM_MAX_AGE): it would miss events, so it is not exported`,
  );
}

export async function planScheduled(
  stream: ProcessedStream,
  store: RunStore,
  teamId: number,
  run: StoredRun,
  schedule: Pick<ScheduleState, 'chainEnd' | 'chainSeq'>,
  clock: ExportClock,
): Promise<RunPlan> {
  const bounds = await stream.bounds();
  const realStart = clock.toReal(run.start);
  const realEnd = clock.toReal(run.end);
  let firstSeq: number;
  // A chain position past the stream's end means PROCESSED was made anew (sequences start over):
  // the run then goes by time, as a first run does, rather than reading nothing for ever.
  if (schedule.chainEnd === run.start && schedule.chainSeq !== null && schedule.chainSeq <= bounds.lastSeq) {
    firstSeq = schedule.chainSeq + 1;
    if (bounds.firstSeq > 1 && firstSeq < bounds.firstSeq) throw retentionError('this run', realStart, bounds.firstTimeMs);
  } else {
    if (bounds.firstSeq > 1 && bounds.firstTimeMs !== undefined && bounds.firstTimeMs > realStart) throw retentionError('this run', realStart, bounds.firstTimeMs);
    firstSeq = (await stream.firstSeqAtOrAfter(teamId, realStart)) ?? bounds.lastSeq + 1;
  }
  const afterEnd = await stream.firstSeqAtOrAfter(teamId, realEnd);
  const lastSeq = Math.max(firstSeq - 1, (afterEnd ?? bounds.lastSeq + 1) - 1);
  const exclude = (await store.completedRanges('backfill', firstSeq, lastSeq)).flatMap((p) =>
    p.kind === 'events' && p.mode === 'timestamp' ? [{ firstSeq: p.firstSeq, lastSeq: p.lastSeq, startUs: p.startUs, endUs: p.endUs }] : [],
  );
  return { kind: 'events', mode: 'arrival', firstSeq, lastSeq, exclude };
}

export async function planBackfill(stream: ProcessedStream, store: RunStore, teamId: number, run: StoredRun, skewMs: number): Promise<RunPlan> {
  const bounds = await stream.bounds();
  const scanFrom = run.start - skewMs;
  if (bounds.firstSeq > 1 && bounds.firstTimeMs !== undefined && bounds.firstTimeMs > scanFrom) throw retentionError('this backfill run', run.start, bounds.firstTimeMs);
  const firstSeq = (await stream.firstSeqAtOrAfter(teamId, scanFrom)) ?? bounds.lastSeq + 1;
  const lastSeq = Math.max(firstSeq - 1, bounds.lastSeq);
  const exclude = (await store.completedRanges('scheduled', firstSeq, lastSeq)).flatMap((p) =>
    p.kind === 'events' && p.mode === 'arrival' ? [{ firstSeq: p.firstSeq, lastSeq: p.lastSeq }] : [],
  );
  return { kind: 'events', mode: 'timestamp', firstSeq, lastSeq, startUs: run.start * 1000, endUs: run.end * 1000, exclude };
}

/** Whether a plan of events keeps a record it read. */
export function keeps(plan: Extract<RunPlan, { kind: 'events' }>, r: Pick<ExportRecord, 'seq' | 'timestampUs'>): boolean {
  if (plan.mode === 'arrival') {
    for (const x of plan.exclude) if (r.seq >= x.firstSeq && r.seq <= x.lastSeq && r.timestampUs >= x.startUs && r.timestampUs < x.endUs) return false;
    return true;
  }
  if (r.timestampUs < plan.startUs || r.timestampUs >= plan.endUs) return false;
  for (const x of plan.exclude) if (r.seq >= x.firstSeq && r.seq <= x.lastSeq) return false;
  return true;
}
