// Turns for batches (WORKER_BATCH_CONCURRENCY): a batch runs only with a turn, shared by all of a
// worker's partitions, so few batches' events are in memory at once.
//
// A turn may carry the batches of several partitions in one transaction (processBatches): at
// moderate rates every shard's batch is small, and each paid for its own statements, commit and
// connection, several times the cost of its events. So a turn takes every batch waiting for one
// while they are small (a quarter of WORKER_BATCH_MAX_EVENTS in all), and shards whose batch is
// lingering for more (batch-planner.ts) stop lingering and join it: lingering is for sharing those
// costs, and a transaction about to run shares them. Under load a batch passes that size alone
// and runs alone, side by side with others as before. When a shared transaction fails, each of its batches runs again alone, in its own
// transaction, where a failure is told apart (its partition lost, a poison event, a conflict) and
// handled as ever.
import type { Batch } from './batch-planner.js';
import type { BatchUnit, CommittedBatch, PartitionState } from './batch-transaction.js';
import { eventCountOf } from './message-feed.js';

/** A partition stopped before its batch started: the batch is left to the next owner. */
export class StoppedError extends Error {
  override name = 'StoppedError';
}

/** A transaction shared with other partitions' batches failed: run this batch alone. */
export class SharedBatchFailedError extends Error {
  override name = 'SharedBatchFailedError';
}

export interface TurnRequest {
  partition: PartitionState;
  /** The batch, taken when the turn comes (undefined: nothing to process); may throw (a lapsed lease). */
  take(): Batch | undefined;
  /** Processes the batch in a transaction of its own. */
  alone(batch: Batch): Promise<CommittedBatch>;
  /** Only alone (a shared transaction with it failed). */
  single: boolean;
  stop: AbortSignal;
}

interface Waiting {
  request: TurnRequest;
  resolve: (result: CommittedBatch | undefined) => void;
  reject: (err: unknown) => void;
  forget: () => void;
}

export interface TurnOptions {
  concurrency: number;
  /**
   * Batches share a turn while they hold fewer events than this in all; a bigger batch runs alone.
   * Sharing pays where batches are small; big ones gain nothing from it, and running them side by
   * side in several turns keeps PostgreSQL and the worker busy at once.
   */
  shareBelowEvents: number;
  /** Batches of several partitions may share a turn (false: each has a turn of its own). */
  share: boolean;
  together(units: readonly BatchUnit[]): Promise<CommittedBatch[]>;
}

export class BatchTurns {
  private readonly queue: Waiting[] = [];
  private active = 0;
  /** Batches in the transactions running now. */
  private batchesActive = 0;
  private gathering = false;
  /** Partitions lingering for more: called when a turn is about to start, so they join it. */
  private readonly lingering = new Set<() => void>();

  constructor(private readonly o: TurnOptions) {}

  get activeCount(): number {
    return this.batchesActive;
  }

  get pendingCount(): number {
    return this.queue.length;
  }

  /**
   * Processes the request's batch when a turn is free (resolves with what committed, or
   * undefined when there was nothing to take). A partition stopped before its turn comes stops
   * waiting at once: the batch is not taken, and the next owner processes it from the committed
   * position (a planned one exactly as planned). Work that has started is waited for.
   */
  run(request: TurnRequest): Promise<CommittedBatch | undefined> {
    if (request.stop.aborted) return Promise.reject(new StoppedError('stopped before the batch had its turn: it will be processed later'));
    return new Promise((resolve, reject) => {
      const onStop = () => {
        const at = this.queue.indexOf(waiting);
        if (at === -1) return;
        this.queue.splice(at, 1);
        reject(new StoppedError('stopped while the batch waited for its turn: it will be processed later'));
      };
      const waiting: Waiting = { request, resolve, reject, forget: () => request.stop.removeEventListener('abort', onStop) };
      request.stop.addEventListener('abort', onStop, { once: true });
      this.queue.push(waiting);
      this.schedule();
    });
  }

  /**
   * While a partition lingers (its batch short of the limits, waiting for more), `wake` is called
   * if a turn starts meanwhile: the batch joins it instead. Returns the function that ends it.
   */
  joinNextTurn(wake: () => void): () => void {
    if (!this.o.share) return () => undefined;
    this.lingering.add(wake);
    return () => this.lingering.delete(wake);
  }

  private schedule(): void {
    while (this.active < this.o.concurrency && this.queue.length > 0 && !this.gathering) {
      if (this.lingering.size > 0) {
        // Their batches are queued within this turn of the event loop (promise callbacks): start
        // the turn after that.
        const wakes = [...this.lingering];
        this.lingering.clear();
        for (const wake of wakes) wake();
        this.gathering = true;
        setImmediate(() => {
          this.gathering = false;
          this.schedule();
        });
        return;
      }
      this.startTurn();
    }
  }

  private startTurn(): void {
    if (this.active >= this.o.concurrency || this.queue.length === 0) return;
    const taken: { waiting: Waiting; batch: Batch }[] = [];
    let events = 0;
    while (this.queue.length > 0 && events < this.o.shareBelowEvents) {
      const next = this.queue[0]!;
      // A batch that must run alone goes alone, and nothing joins a turn it is in.
      if (taken.length > 0 && (next.request.single || !this.o.share)) break;
      this.queue.shift();
      next.forget();
      let batch: Batch | undefined;
      try {
        batch = next.request.take();
      } catch (err) {
        next.reject(err);
        continue;
      }
      if (!batch) {
        next.resolve(undefined);
        continue;
      }
      taken.push({ waiting: next, batch });
      for (const m of batch.messages) events += eventCountOf(m);
      if (next.request.single || !this.o.share) break;
    }
    if (taken.length === 0) return;
    this.active++;
    this.batchesActive += taken.length;
    void this.process(taken).finally(() => {
      this.active--;
      this.batchesActive -= taken.length;
      this.schedule();
    });
  }

  private async process(taken: { waiting: Waiting; batch: Batch }[]): Promise<void> {
    if (taken.length === 1) {
      const [{ waiting, batch }] = taken as [{ waiting: Waiting; batch: Batch }];
      await waiting.request.alone(batch).then(waiting.resolve, waiting.reject);
      return;
    }
    try {
      const committed = await this.o.together(taken.map(({ waiting, batch }) => ({ partition: waiting.request.partition, batch })));
      taken.forEach(({ waiting }, i) => waiting.resolve(committed[i]));
    } catch (err) {
      for (const { waiting } of taken) waiting.reject(new SharedBatchFailedError(`a transaction shared with ${taken.length - 1} other batches failed: running alone`, { cause: err }));
    }
  }
}
