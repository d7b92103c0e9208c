// A parsed request as it crosses from a parse thread to the event loop. Its lines are one
// transferred buffer; its segments travel as a transferred Int32Array plus the ids they carry,
// because structured-cloning one object per segment (a batch of 1,000 events for 1,000 users
// has 1,000) would cost the event loop what the thread saved it.
import type { ParsedRequest, Segment } from '../parse/index.js';

/** Numbers per segment in `table`: shard, count, start, end. */
const FIELDS = 4;

export interface ParsedWire extends Omit<ParsedRequest, 'segments'> {
  table: Int32Array;
  distinctIds: (string | undefined)[] | null;
  messageIds: (string | undefined)[] | null;
}

export function toWire(parsed: ParsedRequest): ParsedWire {
  const { segments, ...rest } = parsed;
  const table = new Int32Array(segments.length * FIELDS);
  segments.forEach((s, i) => table.set([s.shard, s.count, s.start, s.end], i * FIELDS));
  const realtime = segments.length > 0 && segments[0]!.distinctId !== undefined;
  const sealed = segments.length > 0 && segments[0]!.messageId !== undefined;
  return {
    ...rest,
    table,
    distinctIds: realtime ? segments.map((s) => s.distinctId) : null,
    messageIds: sealed ? segments.map((s) => s.messageId) : null,
  };
}

export function fromWire(wire: ParsedWire): ParsedRequest {
  const { table, distinctIds, messageIds, ...rest } = wire;
  const segments: Segment[] = new Array<Segment>(table.length / FIELDS);
  for (let i = 0; i < segments.length; i++) {
    const base = i * FIELDS;
    segments[i] = {
      shard: table[base]!,
      count: table[base + 1]!,
      start: table[base + 2]!,
      end: table[base + 3]!,
      distinctId: distinctIds?.[i],
      messageId: messageIds?.[i],
    };
  }
  return { ...rest, segments };
}
