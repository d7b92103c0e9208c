// A batch that fails on its own content (isDeterministicFailure: PostgreSQL refusing a value,
// JSON too deep to serialise, an exception of processing code) would fail on every retry and stop
// its shard for every project on it. Instead, the events that make it fail are found by trials
// (batch-transaction.ts tryBatch: the batch's steps on some of its events, rolled back) and left
// out; they become `event_processing_failed` warnings and the rest of the batch commits.
//
// The search: prefixes of the batch's events in stream order (persons depend on the events before
// them, so a trial keeps every event before the ones it tests). Starting after the prefix known to
// process, prefixes grow 1, 2, 4, … events until one fails, then halve the gap: the first event
// whose prefix fails is the culprit, found in O(log n) trials, and a dense run of culprits costs
// about one trial each. A batch replayed after a crash finds the same culprits the same way, so it
// republishes the same PROCESSED messages.

/** Trials could not make the batch fail: what failed was of the moment (retried like an outage). */
export class FailureNotReproducedError extends Error {
  override name = 'FailureNotReproducedError';
}

/** The batch fails without any of its events: not an event's fault (a bug, a schema problem): retried, never isolated. */
export class BatchFailsWithoutEventsError extends Error {
  override name = 'BatchFailsWithoutEventsError';
}

/**
 * Runs the batch with the first `count` candidate events: undefined when it processes, the error
 * when it fails on its content; a failure of the moment is thrown.
 */
export type Trial = (count: number) => Promise<unknown>;

export interface Culprit {
  /** Index in the candidates of the first event whose prefix fails. */
  index: number;
  /** What the smallest failing prefix failed with. */
  error: unknown;
}

/**
 * Finds the first culprit among `candidates` events, given that the first `knownGood` of them
 * process. Throws FailureNotReproducedError when all of them process in a trial, and
 * BatchFailsWithoutEventsError when none of them do either.
 */
export async function findCulprit(candidates: number, knownGood: number, trial: Trial): Promise<Culprit> {
  const whole = await trial(candidates);
  if (whole === undefined) throw new FailureNotReproducedError('the batch processes in a trial: its failure was of the moment');
  if (candidates === 0) throw new BatchFailsWithoutEventsError(`the batch fails with none of its events: ${describe(whole)}`, { cause: whole });
  let good = Math.min(knownGood, candidates - 1);
  let bad = candidates;
  let error = whole;
  for (let step = 1; good + step < bad; step *= 2) {
    const failed = await trial(good + step);
    if (failed === undefined) {
      good += step;
    } else {
      bad = good + step;
      error = failed;
      break;
    }
  }
  while (bad - good > 1) {
    const mid = good + Math.floor((bad - good) / 2);
    const failed = await trial(mid);
    if (failed === undefined) {
      good = mid;
    } else {
      bad = mid;
      error = failed;
    }
  }
  if (bad === 1 && knownGood === 0) {
    const empty = await trial(0);
    if (empty !== undefined) throw new BatchFailsWithoutEventsError(`the batch fails with none of its events: ${describe(empty)}`, { cause: empty });
  }
  return { index: bad - 1, error };
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
