// Spike detection: a token bucket per (project, distinct_id). A distinct_id sending realtime
// events faster than the sustained rate (after its burst) has them diverted to OVERFLOW, so
// one hot id cannot hold up its shard. Memory stays bounded: idle buckets are swept, and past
// SPIKE_MAX_TRACKED ids the least recently seen is forgotten (it starts again with a full burst,
// so forgetting can only let an id through, never divert it wrongly).
//
// The bucket may go into debt: events are let through while any token is left and charged in
// full, so a quiet id sending one large request (a batch flushed after a while offline) is not
// diverted whole just because the request is bigger than what is left. The debt is not floored:
// the id stays diverted until the refill has paid for everything it sent, so its sustained rate
// holds whatever the size of its requests.

interface Bucket {
  tokens: number;
  updatedMs: number;
}

export interface SpikeLimiterOptions {
  perSecond: number;
  burst: number;
  /** Hard cap on tracked ids; past it the least recently seen are forgotten. */
  maxTracked: number;
}

export class SpikeLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxTracked: number;
  private readonly sweepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SpikeLimiterOptions) {
    this.maxTracked = options.maxTracked;
    if (this.enabled) {
      this.sweepTimer = setInterval(() => this.sweep(Date.now()), 10_000);
      this.sweepTimer.unref();
    }
  }

  get enabled(): boolean {
    return this.options.perSecond > 0;
  }

  get tracked(): number {
    return this.buckets.size;
  }

  /**
   * True while the id has a token left: it is charged all `count`, so its balance may go negative
   * and it stays diverted until the refill has paid for every event let through (the sustained
   * rate holds for large requests too). False, charging nothing, when it has none: divert.
   */
  allow(projectId: number, distinctId: string, count: number, nowMs = Date.now()): boolean {
    if (!this.enabled) return true;
    const key = `${projectId}:${distinctId}`;
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.maxTracked) this.buckets.delete(this.buckets.keys().next().value!);
      bucket = { tokens: this.options.burst, updatedMs: nowMs };
    } else {
      const refill = ((nowMs - bucket.updatedMs) / 1000) * this.options.perSecond;
      bucket.tokens = Math.min(this.options.burst, bucket.tokens + refill);
      bucket.updatedMs = nowMs;
      this.buckets.delete(key); // re-inserted below: Map order is then least recently seen first
    }
    this.buckets.set(key, bucket);
    if (bucket.tokens <= 0) return false;
    bucket.tokens -= count;
    return true;
  }

  close(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  /** Drops buckets that would be full again: they behave exactly like new ones. */
  private sweep(nowMs: number): void {
    const { perSecond, burst } = this.options;
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((nowMs - bucket.updatedMs) / 1000) * perSecond >= burst) this.buckets.delete(key);
    }
  }
}
