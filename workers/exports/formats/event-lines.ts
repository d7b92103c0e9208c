// The JSONLines text of one PROCESSED message's events as a run keeps them: parsed, chosen (the
// run's plan, include_events / exclude_events) and formatted in one call, so that S3 JSONLines
// runs do it in a thread (line-pool.ts) while the event loop reads PROCESSED and feeds the upload.
// The record path's own functions (records.ts, plan.ts): the same bytes either way.
import { keeps, type RunPlan } from '../plan.js';
import { eventFilter, eventJsonLine, exportRecordOf, processedLines } from '../records.js';

export interface EventLinesTask {
  data: Uint8Array;
  seq: number;
  /** When PROCESSED stored the message, microseconds since the epoch. */
  timeUs: number;
  plan: Extract<RunPlan, { kind: 'events' }>;
  /** The destination config's include_events / exclude_events. */
  filter: { include_events?: unknown; exclude_events?: unknown };
}

export interface EventLines {
  /** Lines of the message that are events. */
  read: number;
  /** The lines of the events kept, joined (each ends with a newline). */
  text: string;
  /** Where each line ends in `text` (characters), and its UTF-8 bytes. */
  ends: number[];
  bytes: number[];
}

export function formatEventLines(task: EventLinesTask): EventLines {
  const wanted = eventFilter(task.filter);
  const lines: string[] = [];
  const ends: number[] = [];
  const bytes: number[] = [];
  let read = 0;
  let length = 0;
  for (const line of processedLines(task.data)) {
    const r = exportRecordOf(line, task.timeUs, task.seq);
    if (!r) continue;
    read++;
    if (!keeps(task.plan, r) || !wanted(r.event)) continue;
    const text = eventJsonLine(r);
    lines.push(text);
    length += text.length;
    ends.push(length);
    bytes.push(Buffer.byteLength(text));
  }
  return { read, text: lines.join(''), ends, bytes };
}
