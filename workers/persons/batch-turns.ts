// Turns for batches (WORKER_BATCH_CONCURRENCY): a batch runs only with a turn, shared by all of a
// worker's partitions, so few batches' events are in memory at once.
import type { LimitFunction } from 'p-limit';

/** A partition stopped before its batch started: the batch is left to the next owner. */
export class StoppedError extends Error {
  override name = 'StoppedError';
}

/**
 * Runs `work` when a turn is free. A partition stopped (handed over, shutting down) before the
 * turn comes stops waiting at once: the batch is not started, and the next owner processes it from
 * the committed position (a planned one exactly as planned). Work that has started is waited for.
 */
export async function inTurn(slots: LimitFunction, stop: AbortSignal, work: () => Promise<void>): Promise<void> {
  let started = false;
  const turn = slots(async () => {
    started = true;
    if (stop.aborted) throw new StoppedError('stopped before the batch had its turn: it will be processed later');
    await work();
  });
  if (!started) {
    // Behind other shards' batches: wait for the turn or for this shard to stop, whichever is first.
    let onStop!: () => void;
    const stopped = new Promise<void>((resolve) => (onStop = resolve));
    if (stop.aborted) onStop();
    else stop.addEventListener('abort', onStop, { once: true });
    try {
      await Promise.race([turn, stopped]);
    } finally {
      stop.removeEventListener('abort', onStop);
    }
    if (!started) {
      // The turn, when it comes, ends at once (stopping): nothing waits for it any more.
      turn.catch(() => undefined);
      throw new StoppedError('stopped while the batch waited for its turn: it will be processed later');
    }
  }
  await turn;
}
