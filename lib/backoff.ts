/**
 * The wait before retry number `step` + 1 (step 0: the first retry): `firstMs`, doubling each
 * step, at most `maxMs`. Every retry loop of the project waits this way; each names its own
 * first wait and ceiling.
 */
export function exponentialBackoff(firstMs: number, step: number, maxMs: number): number {
  // 2 ** 30 already passes any ceiling used here; a long outage's step count must not reach Infinity.
  return Math.min(maxMs, firstMs * 2 ** Math.min(Math.max(0, step), 30));
}
