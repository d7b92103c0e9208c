// Where a (stream, shard)'s batches end. Each batch's end is durable before anything of it is
// published (shard_positions.pending_end), so a batch cut short by a crash is replayed exactly:
// the same messages, hence the same PROCESSED ids. Under load the commit of a batch plans the next
// one (it is buffered already); a plan this owner made itself and published nothing under may
// grow when more arrived before the batch's turn. A plan found at take-over is replayed as it is.
import { setTimeout as sleep } from 'node:timers/promises';
import type { JsMsg } from '@nats-io/jetstream';
import type { PartitionStart } from '../coordination/index.js';
import type { MessageFeed } from './message-feed.js';

/** Messages processed and committed together. */
export interface Batch {
  messages: JsMsg[];
  /** The position once committed (past the last message when planned messages expired). */
  end: number;
  /** Its end was recorded before it was taken (and it may have been published): process exactly it. */
  planned: boolean;
  /** The own, unused plan this batch outgrew: its end is recorded in its place. */
  replacing?: number;
  /**
   * Events found to make the batch fail every time (poison-isolation.ts), by dedup key, with the
   * reason: left out of processing and reported. Found again the same way on a replay.
   */
  failed: Map<string, string>;
  /** How many of the batch's events, in order and leaving out `failed`, are known to process. */
  knownGood: number;
}

export interface BatchSize {
  maxEvents: number;
  maxBytes: number;
  /** How long a batch that does not fill the limits waits for more after its first message arrived (ms). */
  lingerMs: number;
}

export class BatchPlanner {
  /** Last stream sequence whose effects are committed. */
  position = 0;
  /** End of the next batch as recorded in Postgres (pending_end), if any. */
  private planned: number | undefined;
  /**
   * The plan was made by this owner's last commit, so nothing has been published under it yet: when
   * more has arrived by the batch's turn, the batch may grow past it. A plan found at take-over may
   * have been published already and is replayed exactly.
   */
  private planIsOwnAndUnused = false;

  constructor(private readonly size: BatchSize) {}

  /** After a take-over: go on from the committed position, replaying a plan found there exactly. */
  startFrom(start: PartitionStart): void {
    this.position = start.position;
    this.planned = start.pendingEnd !== undefined && start.pendingEnd > start.position ? start.pendingEnd : undefined;
    this.planIsOwnAndUnused = false;
  }

  get plannedEnd(): number | undefined {
    return this.planned;
  }

  /**
   * Waits until a batch can be taken (false: nothing yet). A planned batch waits until the feed
   * reaches its end, or shows nothing more exists up to it. An unplanned one that would not fill
   * the limits lingers: most of a batch's cost (its statements, its commit, its messages) does
   * not grow with its events, so at moderate rates a shard's batch waits up to `lingerMs` after
   * its first message for more, or until a turn starts that it can share (`joinNextTurn`,
   * batch-turns.ts). Under load the limits fill at once, or the commit before planned the batch
   * (a backlog): neither waits.
   */
  async ready(feed: MessageFeed, stopping: () => boolean, joinNextTurn: (wake: () => void) => () => void = () => () => undefined): Promise<boolean> {
    await feed.waitForMessages(1_000);
    const last = feed.peekLast();
    if (stopping() || !last) return false;
    const pendingEnd = this.planned;
    const hasPlan = pendingEnd !== undefined && pendingEnd > this.position;
    if (hasPlan && last.seq < pendingEnd && last.info.pending > 0) {
      // The planned batch may be bigger than the buffer (limits lowered since it was planned).
      feed.fillThrough(pendingEnd);
      await sleep(20);
      return false;
    }
    if (!hasPlan && this.size.lingerMs > 0) {
      // A turn starting meanwhile (other shards' batches) takes this one along: its costs are shared then.
      let joining = false;
      const leave = joinNextTurn(() => {
        joining = true;
        feed.interrupt();
      });
      try {
        // firstBufferedAt is 0 for messages left from the last take: they have waited already.
        for (let left = feed.firstBufferedAt + this.size.lingerMs - performance.now(); left > 0 && !joining && !feed.fills(this.size) && feed.receiving; ) {
          await feed.waitForMore(left);
          if (stopping()) return false;
          left = feed.firstBufferedAt + this.size.lingerMs - performance.now();
        }
      } finally {
        leave();
      }
    }
    return true;
  }

  /**
   * The batch, taken when it has its turn. A planned batch (it may have been published already) is
   * exactly its messages, so it gets the same PROCESSED ids; under load every batch is planned by
   * the commit before it. Otherwise, whatever is buffered by then, within limits.
   *
   * A plan this owner made itself is only a floor: if more arrived while the batch waited for its
   * turn and the limits have room, the batch takes that too and records its new end first (one
   * more round trip). Without that, at moderate load every event waited for two batches of its
   * shard, one to be planned and one to be processed.
   */
  take(feed: MessageFeed): Batch | undefined {
    const pendingEnd = this.planned;
    const canGrow = pendingEnd !== undefined && this.planIsOwnAndUnused && (feed.peekEnd(this.size) ?? 0) > pendingEnd;
    if (pendingEnd === undefined || pendingEnd <= this.position || canGrow) {
      const messages = feed.take(this.size);
      if (messages.length === 0) return undefined;
      return { messages, end: messages[messages.length - 1]!.seq, planned: false, replacing: canGrow ? pendingEnd : undefined, failed: new Map(), knownGood: 0 };
    }
    const messages = feed.take({ maxEvents: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER, untilSeq: pendingEnd });
    if (messages.length === 0) {
      // Everything planned is gone from the stream (expired): nothing of it can be replayed.
      this.planned = undefined;
      return undefined;
    }
    // Messages missing up to the planned end no longer exist (expired): the batch covers them too.
    return { messages, end: pendingEnd, planned: true, failed: new Map(), knownGood: 0 };
  }

  /** The end the next batch would have if taken now: planned with this batch's commit. */
  nextEnd(feed: MessageFeed | undefined): number | undefined {
    return feed?.peekEnd(this.size);
  }

  /** A batch committed up to `end`, planning the next one to end at `nextPlannedEnd`. */
  committed(end: number, nextPlannedEnd: number | undefined): void {
    this.position = end;
    this.planned = nextPlannedEnd;
    this.planIsOwnAndUnused = true;
  }
}
