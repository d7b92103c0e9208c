// How far the persons workers are behind capture, for one project (docs/exports.md, "What a run
// reads"): a backfill reads PROCESSED, and an event captured a moment before the backfill was
// asked for may not be through the workers yet. So a backfill run first takes each capture
// stream's last sequence (EVENTS, HISTORICAL, OVERFLOW, each partition) and waits until, for every
// shard, the project's next message after the shard's committed position (`shard_positions`,
// written in the transaction that follows its PROCESSED publish) is past that sequence: then
// everything the project sent before the run is on PROCESSED.
import type { JetStreamManager, MsgRequest } from '@nats-io/jetstream';
import type pg from 'pg';
import { PARTITIONED_KINDS, partitionStreamName, partitionsOf, shardsOfPartition, subjectFor, type StreamKind, type StreamLayout } from '../../lib/index.js';
import { committedPositions } from '../coordination/index.js';

/** A partition still holding a message of the project that the workers have not committed. */
export interface ShardBehind {
  stream: string;
  shard: number;
  /** The project's first uncommitted message in it. */
  seq: number;
  /** The shard's committed position. */
  position: number;
}

/** Each capture stream's last sequence at one moment: what a backfill run waits to see processed. */
export type CaptureMark = ReadonlyMap<string, number>;

interface Partition {
  kind: StreamKind;
  stream: string;
  first: number;
  last: number;
}

export class CaptureProgress {
  private readonly partitions: Partition[];

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly db: pg.Pool,
    layout: StreamLayout,
  ) {
    // The capture streams (the kinds ingest writes and the persons workers consume).
    this.partitions = PARTITIONED_KINDS.flatMap((kind) =>
      Array.from({ length: partitionsOf(kind, layout) }, (_, p) => ({ kind, stream: partitionStreamName(kind, p, layout), ...shardsOfPartition(kind, p, layout) })),
    );
  }

  async mark(): Promise<CaptureMark> {
    const mark = new Map<string, number>();
    for (const p of this.partitions) mark.set(p.stream, (await this.jsm.streams.info(p.stream)).state.last_seq);
    return mark;
  }

  /** The shards where the workers have not yet committed a message of `teamId` stored at or before `mark`. */
  async behind(teamId: number, mark: CaptureMark): Promise<ShardBehind[]> {
    const positions = await committedPositions(this.db, this.partitions.map((p) => p.stream));
    const checks: Array<Promise<ShardBehind | undefined>> = [];
    for (const p of this.partitions) {
      const upTo = mark.get(p.stream) ?? 0;
      for (let shard = p.first; shard <= p.last; shard++) {
        const position = positions.get(`${p.stream}/${shard}`) ?? 0;
        if (position >= upTo) continue;
        checks.push(this.nextAfter(p.stream, subjectFor(p.kind, teamId, shard), position).then((seq) => (seq !== undefined && seq <= upTo ? { stream: p.stream, shard, seq, position } : undefined)));
      }
    }
    return (await Promise.all(checks)).filter((b): b is ShardBehind => b !== undefined);
  }

  /** The sequence of the first message of `subject` after `position`; undefined when there is none. */
  private async nextAfter(stream: string, subject: string, position: number): Promise<number | undefined> {
    // STREAM.MSG.GET with next_by_subj (nats-server ≥ 2.9); the client's type lists only seq and last_by_subj.
    const msg = await this.jsm.streams.getMessage(stream, { seq: position + 1, next_by_subj: subject } as unknown as MsgRequest);
    return msg?.seq;
  }
}
