// Collects the NDJSON lines of a request and lays them out in one buffer, ordered by shard
// and — for realtime events — by distinct_id within a shard (first appearance first), keeping
// each distinct_id's lines in request order. Each segment is one group cut at line boundaries
// so that it fits in one JetStream message.
import { shardOf } from '../lib/index.js';
import { CaptureError } from './errors.js';

export const SEGMENT_FIELDS = 4;

export interface PackedLines {
  /** Every line, segment after segment. */
  data: Uint8Array;
  /** Per segment: [shard, line count, start byte, end byte]. */
  segments: Int32Array;
  /** Per segment, the distinct_id its lines share (realtime only; spike detection uses it). */
  segmentDistinctIds: string[] | null;
}

interface Group {
  shard: number;
  distinctId: string;
  lines: string[];
}

const encoder = new TextEncoder();

export class LinePacker {
  private readonly groups = new Map<string | number, Group>();
  private chars = 0;
  count = 0;

  constructor(
    private readonly shardCount: number,
    private readonly maxMessageBytes: number,
    /** Realtime events are grouped per distinct_id (spike detection acts per id); historical per shard. */
    private readonly perDistinctId: boolean,
  ) {}

  add(distinctId: string, line: string): void {
    const shard = shardOf(distinctId, this.shardCount);
    const key = this.perDistinctId ? distinctId : shard;
    let group = this.groups.get(key);
    if (!group) {
      group = { shard, distinctId, lines: [] };
      this.groups.set(key, group);
    }
    group.lines.push(line);
    this.chars += line.length;
    this.count++;
  }

  /** Encodes every line. `transferable` output owns its ArrayBuffer (not a slice of Node's pool). */
  pack(transferable: boolean): PackedLines {
    const ordered = [...this.groups.values()].sort((a, b) => a.shard - b.shard);
    const allocate = (size: number) => (transferable ? Buffer.allocUnsafeSlow(size) : Buffer.allocUnsafe(size));
    // One pass: JSON is mostly ASCII, so UTF-16 length + 1/8 nearly always fits; encodeInto
    // reports a short write and the buffer grows.
    let data = allocate(this.chars + (this.chars >> 3) + 64);
    const segments: number[] = [];
    const ids: string[] | null = this.perDistinctId ? [] : null;
    let offset = 0;
    for (const group of ordered) {
      let start = offset;
      let count = 0;
      for (const line of group.lines) {
        let written = encoder.encodeInto(line, data.subarray(offset));
        while (written.read < line.length) {
          const bigger = allocate(data.length * 2 + line.length * 3);
          data.copy(bigger, 0, 0, offset);
          data = bigger;
          written = encoder.encodeInto(line, data.subarray(offset));
        }
        const bytes = written.written;
        if (bytes > this.maxMessageBytes) {
          throw new CaptureError('event_too_large', `an event is ${bytes} bytes; the largest accepted is ${this.maxMessageBytes}`);
        }
        if (offset + bytes - start > this.maxMessageBytes && count > 0) {
          segments.push(group.shard, count, start, offset);
          ids?.push(group.distinctId);
          start = offset;
          count = 0;
        }
        offset += bytes;
        count++;
      }
      segments.push(group.shard, count, start, offset);
      ids?.push(group.distinctId);
    }
    return { data: data.subarray(0, offset), segments: Int32Array.from(segments), segmentDistinctIds: ids };
  }
}
