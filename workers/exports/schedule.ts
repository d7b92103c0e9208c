// When scheduled runs happen (docs/exports.md, "Schedule"): intervals aligned in UTC — hours,
// days, weeks starting Sunday 00:00 UTC (PostHog's calendar), 5 and 15 minutes — and a run for
// [start, end) is due once `end + grace` has passed. start_at/end_at bound the runs' ends, as
// PostHog's schedule bounds its actions.
import { INTERVAL_SECONDS, type BatchExportInterval } from '../../lib/index.js';

/** 1970-01-04T00:00:00Z, the first Sunday after the epoch (a Thursday). */
const FIRST_SUNDAY_MS = 3 * 86_400_000;

export function intervalMs(interval: BatchExportInterval): number {
  return INTERVAL_SECONDS[interval] * 1000;
}

/** The start of the interval that contains `t` (ms since the epoch). */
export function alignedStart(t: number, interval: BatchExportInterval): number {
  const length = intervalMs(interval);
  const origin = interval === 'week' ? FIRST_SUNDAY_MS : 0;
  return Math.floor((t - origin) / length) * length + origin;
}

export interface ScheduleBounds {
  /** ISO 8601 or null: no run ends before it. */
  start_at: string | null;
  /** ISO 8601 or null: no run ends after it. */
  end_at: string | null;
}

/** Whether the scheduled run ending at `end` is inside start_at/end_at. */
export function withinBounds(end: number, bounds: ScheduleBounds): boolean {
  if (bounds.start_at !== null && end <= Date.parse(bounds.start_at)) return false;
  if (bounds.end_at !== null && end > Date.parse(bounds.end_at)) return false;
  return true;
}

/** When the run ending at `end` may start. */
export function dueAt(end: number, graceMs: number): number {
  return end + graceMs;
}

/**
 * The scheduled intervals due at `now` from `nextStart` on, oldest first (catch-up after
 * downtime), at most `limit` of them.
 */
export function dueIntervals(nextStart: number, now: number, interval: BatchExportInterval, graceMs: number, limit = 1000): Array<{ start: number; end: number }> {
  const length = intervalMs(interval);
  const out: Array<{ start: number; end: number }> = [];
  for (let start = nextStart; out.length < limit && dueAt(start + length, graceMs) <= now; start += length) out.push({ start, end: start + length });
  return out;
}
