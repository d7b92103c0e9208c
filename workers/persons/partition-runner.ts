// Runs one (stream, shard) of an owned shard in strict stream order: take over (raise the fence,
// read the committed position), feed from position + 1, and batch after batch in turn
// (batch-planner.ts, batch-transaction.ts) until stopped or the lease is lost. Any failure
// starts the partition again from the committed position.
import { setTimeout as sleep } from 'node:timers/promises';
import { exponentialBackoff, shardFilter, streamOfShard, type Logger, type StreamKind } from '../../lib/index.js';
import {
  errorText,
  isConflictDbError,
  isDeterministicFailure,
  isNatsUnavailable,
  isTransientDbError,
  OwnershipLostError,
  PositionMovedError,
  takeOverPartition,
} from '../coordination/index.js';
import { BatchPlanner, type Batch } from './batch-planner.js';
import { candidateKeys, processBatch, tryBatch, type CommittedBatch, type PartitionState } from './batch-transaction.js';
import { SharedBatchFailedError, StoppedError } from './batch-turns.js';
import { MessageFeed } from './message-feed.js';
import type { PartitionContext } from './partition-context.js';
import { PersonConflictError } from './person-store.js';
import { findCulprit, type Trial } from './poison-isolation.js';
import { FeedStalledError, StallProbe } from './stall-probe.js';

export class PartitionRunner implements PartitionState {
  readonly streamName: string;
  fence = 0;
  duplicatesLikely = false;
  private stopping = false;
  private running: Promise<void> | undefined;
  private readonly stopSignal = new AbortController();
  private readonly planner: BatchPlanner;
  private readonly probe: StallProbe;
  private feed: MessageFeed | undefined;
  private readonly log: Logger;
  private untrack: (() => void) | undefined;

  constructor(
    readonly kind: StreamKind,
    readonly shard: number,
    private readonly ctx: PartitionContext,
    /** False once this worker may no longer act for the shard (lease lapsed locally). */
    readonly leaseValid: () => boolean,
    private readonly onLost: (reason: string) => void,
  ) {
    this.streamName = streamOfShard(kind, shard, ctx.layout);
    this.log = ctx.logger.child({ stream: this.streamName, shard });
    this.planner = new BatchPlanner(ctx.limits);
    this.probe = new StallProbe(ctx.jsm, this.streamName, shardFilter(kind, shard), ctx.maxPayload, this.log);
  }

  get position(): number {
    return this.planner.position;
  }

  nextPlannedEnd(): number | undefined {
    return this.planner.nextEnd(this.feed);
  }

  start(): void {
    this.untrack ??= this.ctx.metrics.trackPartition(() => ({
      stream: this.streamName,
      shard: this.shard,
      position: this.position,
      lag: this.feed?.lag(),
    }));
    this.running ??= this.run().finally(() => this.untrack?.());
  }

  /** Stops fetching, lets the batch in flight commit (or give up if it cannot), and returns. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.stopSignal.abort();
    // An idle shard waits up to a second for messages: a shard handed over must not wait that out.
    this.feed?.interrupt();
    await this.running;
  }

  private async pause(ms: number): Promise<void> {
    if (this.stopping || ms <= 0) return;
    await sleep(ms, undefined, { signal: this.stopSignal.signal }).catch(() => undefined);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let feed: MessageFeed | undefined;
      try {
        feed = await this.takeOver();
        while (!this.stopping) {
          if (!(await this.planner.ready(feed, () => this.stopping, (wake) => this.ctx.turns.joinNextTurn(wake)))) {
            if (feed.ended) throw feed.error instanceof Error ? feed.error : new Error(`consumer ended: ${String(feed.error)}`);
            await this.probe.check(feed);
            continue;
          }
          await this.processWithRetry(feed);
          failures = 0;
        }
      } catch (err) {
        if (err instanceof OwnershipLostError) {
          this.log.warn({ reason: err.message }, 'partition ownership lost: stopping it');
          this.onLost(err.message);
          return;
        }
        if (this.stopping || err instanceof StoppedError) break;
        if (err instanceof FeedStalledError) {
          this.ctx.metrics.feedRestarts.inc({ stream: this.streamName });
          this.log.warn({ reason: err.message, position: this.position }, 'shard consumer stalled: opening a new one from the committed position');
          continue;
        }
        failures++;
        this.ctx.metrics.batchRetries.inc({ reason: isTransientDbError(err) ? 'unavailable' : 'error' });
        this.log.warn({ err: errorText(err), failures }, 'partition failed: restarting it from the committed position');
        await this.pause(exponentialBackoff(100, failures, 5_000));
      } finally {
        await feed?.close();
        this.feed = undefined;
      }
    }
  }

  /** Raises the fence, reads where the partition stands and opens a feed from there. */
  private async takeOver(): Promise<MessageFeed> {
    if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed');
    const info = await this.ctx.jsm.streams.info(this.streamName);
    const start = await takeOverPartition(this.ctx.pool, this.streamName, this.shard, this.ctx.workerId, info.created);
    if (start.reset) this.log.warn('stream was re-created since the stored position: starting again from its beginning');
    this.fence = start.fence;
    this.planner.startFrom(start);
    const limits = this.ctx.limits;
    const messageMaxBytes = this.probe.messageMaxBytes;
    const feed = new MessageFeed(this.ctx.js, {
      stream: this.streamName,
      filterSubject: shardFilter(this.kind, this.shard),
      startSeq: this.position + 1,
      fetchMaxBytes: limits.fetchMaxBytes,
      messageMaxBytes,
      // Room for a whole planned batch plus what the consumer has in flight.
      bufferMaxBytes: limits.maxBytes + limits.fetchMaxBytes + messageMaxBytes,
      onResume: () => this.ctx.metrics.feedResumes.inc({ stream: this.streamName }),
    });
    try {
      await feed.open();
    } catch (err) {
      await feed.close();
      throw err;
    }
    this.feed = feed;
    this.log.debug({ position: this.position, fence: this.fence, planned: this.planner.plannedEnd }, 'partition started');
    return feed;
  }

  /** Takes the batch from `feed` at its first turn and processes it until it commits; the same messages on every attempt. */
  private async processWithRetry(feed: MessageFeed): Promise<void> {
    let batch: Batch | undefined;
    let single = false;
    for (let attempt = 0; ; attempt++) {
      if (this.stopping && attempt > 0) throw new StoppedError('stopping with a batch not committed: it will be replayed');
      if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed before the batch committed');
      try {
        // A turn per attempt: a batch pausing between attempts leaves its turn to other shards.
        const committed = await this.ctx.turns.run({
          partition: this,
          stop: this.stopSignal.signal,
          single,
          take: () => {
            if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed while the batch waited for its turn');
            return (batch ??= this.planner.take(feed));
          },
          alone: (b) => this.processIsolating(b),
        });
        if (committed) this.planner.committed(committed.end, committed.nextPlannedEnd);
        return;
      } catch (err) {
        if (err instanceof OwnershipLostError || err instanceof PositionMovedError || err instanceof StoppedError) throw err;
        if (err instanceof SharedBatchFailedError) {
          // Alone, at once: what failed (and whose it was) shows there.
          this.log.debug({ err: errorText(err.cause) }, 'shared batch failed: running it alone');
          this.ctx.metrics.batchRetries.inc({ reason: 'shared' });
          single = true;
          continue;
        }
        const conflict = err instanceof PersonConflictError || isConflictDbError(err);
        const reason = conflict ? 'conflict' : isTransientDbError(err) || isNatsUnavailable(err) ? 'unavailable' : 'error';
        this.ctx.metrics.batchRetries.inc({ reason });
        const level = conflict && attempt < 3 ? 'debug' : 'warn';
        this.log[level]({ err: errorText(err), attempt, reason, first: batch?.messages[0]?.seq, last: batch?.end }, 'batch failed: retrying');
        await this.pause(conflict ? (attempt < 3 ? 0 : exponentialBackoff(20, attempt, 1_000)) : exponentialBackoff(100, attempt, 5_000));
      }
    }
  }

  /** Processes the batch; while it fails on its own content, leaves out the event that makes it fail and goes on. */
  private async processIsolating(batch: Batch): Promise<CommittedBatch> {
    for (;;) {
      try {
        return await processBatch(this.ctx, this, batch);
      } catch (err) {
        if (!isPoison(err)) throw err;
        await this.isolate(batch, err);
      }
    }
  }

  /** Finds the first event of `batch` that makes it fail (poison-isolation.ts) and marks it failed. */
  private async isolate(batch: Batch, failure: unknown): Promise<void> {
    const keys = candidateKeys(this.kind, batch);
    const where = { first: batch.messages[0]?.seq, last: batch.end };
    this.log.warn({ ...where, err: errorText(failure), events: keys.length }, 'batch fails on its own content: finding the events that make it fail');
    const trial: Trial = async (count) => {
      if (this.stopping) throw new StoppedError('stopped while finding a poison event: the batch will be processed later');
      if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed while finding a poison event');
      this.ctx.metrics.isolationTrials.inc();
      try {
        await tryBatch(this.ctx, this, batch, new Set(keys.slice(0, count)));
        return undefined;
      } catch (err) {
        if (isPoison(err)) return err;
        throw err;
      }
    };
    const culprit = await findCulprit(keys.length, batch.knownGood, trial);
    const key = keys[culprit.index]!;
    const reason = errorText(culprit.error).slice(0, 500);
    batch.failed.set(key, reason);
    batch.knownGood = culprit.index;
    this.log.warn({ ...where, event: key, reason }, 'event left out: processing it fails every time (ingestion warning event_processing_failed)');
  }
}

/** A failure the batch's own content causes, every time: not a lapse, a stop, a conflict or an outage. */
function isPoison(err: unknown): boolean {
  if (err instanceof OwnershipLostError || err instanceof PositionMovedError || err instanceof StoppedError) return false;
  if (err instanceof PersonConflictError || isConflictDbError(err)) return false;
  return isDeterministicFailure(err);
}
