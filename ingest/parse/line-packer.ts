// Collects the NDJSON lines of a request and lays them out in one buffer, ordered by shard
// and — for realtime events — by distinct_id within a shard (first appearance first), keeping
// each distinct_id's lines in request order. Each segment is one group cut at line boundaries
// so that it fits in one JetStream message.
//
// Lines are encoded to UTF-8 as they come, into a buffer outside the JS heap: a 20 MB batch
// never holds its ~24 MB of line strings at once, so a parse thread's heap stays small and
// bounded (see PARSE_THREAD_MAX_HEAP).
//
// Given a message id salt (historical requests), each segment also gets a Nats-Msg-Id derived
// from the salt, its shard and its events' uuids: the same events sent again with the same uuids
// (an importer resuming, a client retrying) make the same messages with the same ids, and
// JetStream stores them once within its duplicate window. (Events without a uuid get a new one
// each time they are sent, so they cannot be recognised.) For that, where segments split must not depend on the
// request either: lines are measured without their request-dependent fields (sent_at, ip; now
// and timestamp have a fixed length), plus VARYING_ALLOWANCE each.
import { createHash } from 'node:crypto';
import { shardOf } from '../../lib/index.js';
import { CaptureError } from '../errors.js';
import { fitsInMessage } from '../message-size.js';

/** Most bytes a line's request-dependent fields take: `,"sent_at":"<24>"` and `,"ip":"<≤45>"`. */
export const VARYING_ALLOWANCE = 128;

/** Lines of one shard (and, for realtime events, one distinct_id) that fit in one message. */
export interface Segment {
  shard: number;
  /** Lines (events) in it. */
  count: number;
  /** Its lines are `data[start, end)`. */
  start: number;
  end: number;
  /** The distinct_id its lines share (realtime only: spike detection acts per id). */
  distinctId: string | undefined;
  /** Its own Nats-Msg-Id (only with a message id salt: historical requests). */
  messageId: string | undefined;
}

export interface PackedLines {
  /** Every line, segment after segment. */
  data: Uint8Array;
  segments: Segment[];
}

interface Group {
  shard: number;
  distinctId: string;
  /** Indexes of its lines, in arrival order. */
  lines: number[];
}

export class LinePacker {
  private readonly groups = new Map<string | number, Group>();
  private readonly order: Group[] = [];
  private buffer: Buffer;
  private offset = 0;
  /** Per line: start byte in `buffer`, then byte length. Starts within V8's on-heap typed array size (64 bytes), so a small request allocates no backing store for it. */
  private spans: Int32Array = new Int32Array(16);
  /** Per line, its event's uuid (only with a message id salt). */
  private readonly uuids: string[] = [];
  count = 0;

  constructor(
    private readonly shardCount: number,
    private readonly maxMessageBytes: number,
    /** Realtime events are grouped per distinct_id (spike detection acts per id); historical per shard. */
    private readonly perDistinctId: boolean,
    /** Output must own its ArrayBuffer (not a slice of Node's pool) to be transferred to another thread. */
    private readonly transferable: boolean,
    /** Expected output size; the buffer grows past it when needed. */
    capacityHint: number,
    /** Set: segments get ids from this salt (unique per project and stream), their shard and their uuids. */
    private readonly messageIdSalt?: string,
    /** Bytes of every line's request-dependent fields (see VARYING_ALLOWANCE): the same for all events of a request. */
    private readonly varyingBytes = 0,
    /** Takes bytes from the in-flight budget before the output buffer grows (false: 503). */
    private readonly reserve: (bytes: number) => boolean = () => true,
  ) {
    this.buffer = this.allocate(Math.max(256, capacityHint));
  }

  private allocate(size: number): Buffer {
    if (!this.reserve(size)) throw new CaptureError('overloaded', 'ingest node is at capacity (parsed output), please retry');
    return this.transferable ? Buffer.allocUnsafeSlow(size) : Buffer.allocUnsafe(size);
  }

  /** One event: its JSON (eventJson), written as a line (the newline is added here). */
  add(distinctId: string, json: string, uuid: string): void {
    // Room for the worst case (3 bytes per UTF-16 unit, and the newline), then one write:
    // Buffer#write (UTF-8) is about 1.5× as fast as TextEncoder.encodeInto on event lines
    // (measured 2026-11-24).
    if (this.offset + json.length * 3 + 1 > this.buffer.length) {
      const bigger = this.allocate(this.buffer.length * 2 + json.length * 3 + 1);
      this.buffer.copy(bigger, 0, 0, this.offset);
      this.buffer = bigger;
    }
    const bytes = this.buffer.write(json, this.offset) + 1;
    this.buffer[this.offset + bytes - 1] = 0x0a;
    if (!fitsInMessage(bytes, this.maxMessageBytes)) {
      throw new CaptureError('event_too_large', `an event is ${bytes} bytes; the largest accepted is ${this.maxMessageBytes}`);
    }
    const shard = shardOf(distinctId, this.shardCount);
    const key = this.perDistinctId ? distinctId : shard;
    let group = this.groups.get(key);
    if (!group) {
      group = { shard, distinctId, lines: [] };
      this.groups.set(key, group);
      this.order.push(group);
    }
    if (2 * this.count + 2 > this.spans.length) {
      const bigger = new Int32Array(this.spans.length * 2);
      bigger.set(this.spans);
      this.spans = bigger;
    }
    this.spans[2 * this.count] = this.offset;
    this.spans[2 * this.count + 1] = bytes;
    group.lines.push(this.count);
    if (this.messageIdSalt !== undefined) this.uuids.push(uuid);
    this.offset += bytes;
    this.count++;
  }

  pack(): PackedLines {
    const ordered = this.order.length > 1 ? [...this.order].sort((a, b) => a.shard - b.shard) : this.order;
    // Lines already in their final order (one group, or groups that arrived one after another
    // in shard order) stay where they are; otherwise they are copied into place.
    const inPlace = ordered.every((g, i) => g === this.order[i] && g.lines.every((line, k) => k === 0 || line === g.lines[k - 1]! + 1));
    const data = inPlace ? this.buffer : this.allocate(this.offset);
    const segments: Segment[] = [];
    const stableSplits = this.messageIdSalt !== undefined;
    let out = 0;
    for (const group of ordered) {
      let start = out;
      let first = 0;
      let count = 0;
      /** Bytes of the open segment without request-dependent fields, each line counted at the allowance instead. */
      let stable = 0;
      const close = (upTo: number) => {
        segments.push({
          shard: group.shard,
          count,
          start,
          end: out,
          distinctId: this.perDistinctId ? group.distinctId : undefined,
          messageId: stableSplits ? this.messageId(group.shard, group.lines.slice(first, upTo)) : undefined,
        });
      };
      for (let k = 0; k < group.lines.length; k++) {
        const line = group.lines[k]!;
        const from = this.spans[2 * line]!;
        const bytes = this.spans[2 * line + 1]!;
        const lineStable = stableSplits ? bytes - this.varyingBytes + VARYING_ALLOWANCE : 0;
        // With stable splits the real size is checked too: only a line with unusually long varying
        // fields could trip it (its segment then depends on the request: workers still drop repeats).
        const fits = fitsInMessage(out + bytes - start, this.maxMessageBytes) && (!stableSplits || fitsInMessage(stable + lineStable, this.maxMessageBytes));
        if (count > 0 && !fits) {
          close(k);
          start = out;
          first = k;
          count = 0;
          stable = 0;
        }
        stable += lineStable;
        if (!inPlace) this.buffer.copy(data, out, from, from + bytes);
        out += bytes;
        count++;
      }
      close(group.lines.length);
    }
    return { data: data.subarray(0, out), segments };
  }

  private messageId(shard: number, lines: readonly number[]): string {
    const hash = createHash('sha256').update(`${this.messageIdSalt!}.${shard}`);
    for (const line of lines) hash.update(this.uuids[line]!);
    return `u:${hash.digest('base64url').slice(0, 27)}`;
  }
}
