import { describe, expect, it } from 'vitest';
import { BatchFailsWithoutEventsError, FailureNotReproducedError, findCulprit } from './poison-isolation.js';

/** Trials of a batch of `n` events where the events in `poison` fail it; counts the trials. */
function batchWith(poison: Iterable<number>, options: { failsEmpty?: boolean } = {}) {
  const bad = new Set(poison);
  const sizes: number[] = [];
  const trial = (count: number) => {
    sizes.push(count);
    if (options.failsEmpty) return Promise.resolve(new Error('fails with nothing'));
    for (let i = 0; i < count; i++) if (bad.has(i)) return Promise.resolve(new RangeError(`event ${i}`));
    return Promise.resolve(undefined);
  };
  return { trial, sizes };
}

/** Isolates every culprit the way the partition runner does: one at a time, the candidates shrinking. */
async function isolateAll(n: number, poison: number[]): Promise<{ found: number[]; trials: number }> {
  let candidates = Array.from({ length: n }, (_, i) => i);
  let knownGood = 0;
  const found: number[] = [];
  let trials = 0;
  while (candidates.some((c) => poison.includes(c))) {
    const current = candidates;
    const { trial, sizes } = batchWith(poison.map((p) => current.indexOf(p)).filter((i) => i >= 0));
    const culprit = await findCulprit(current.length, knownGood, trial);
    trials += sizes.length;
    found.push(current[culprit.index]!);
    candidates = current.filter((_, i) => i !== culprit.index);
    knownGood = culprit.index;
  }
  return { found, trials };
}

describe('poison isolation', () => {
  it('findCulprit - finds the first event whose prefix fails, with the error it fails with, in O(log n) trials', async () => {
    for (const at of [0, 1, 517, 9_998, 9_999]) {
      const { trial, sizes } = batchWith([at]);
      const culprit = await findCulprit(10_000, 0, trial);
      expect(culprit.index).toBe(at);
      expect(String(culprit.error)).toBe(`RangeError: event ${at}`);
      // The whole batch, then galloping and halving: at most about 2 log2(n) + 2.
      expect(sizes.length, `trials for a culprit at ${at}`).toBeLessThanOrEqual(30);
    }
  });

  it('findCulprit - every culprit of a batch, in order; a dense run costs a few trials each', async () => {
    expect(await isolateAll(1_000, [3, 400, 401, 999])).toMatchObject({ found: [3, 400, 401, 999] });
    const dense = Array.from({ length: 100 }, (_, i) => 200 + i);
    const { found, trials } = await isolateAll(1_000, dense);
    expect(found).toEqual(dense);
    expect(trials).toBeLessThan(100 * 4);
  });

  it('findCulprit - a batch that processes in a trial, or fails with no events at all, has no culprit', async () => {
    await expect(findCulprit(50, 0, batchWith([]).trial)).rejects.toBeInstanceOf(FailureNotReproducedError);
    await expect(findCulprit(50, 0, batchWith([], { failsEmpty: true }).trial)).rejects.toBeInstanceOf(BatchFailsWithoutEventsError);
    await expect(findCulprit(0, 0, batchWith([], { failsEmpty: true }).trial)).rejects.toBeInstanceOf(BatchFailsWithoutEventsError);
  });
});
