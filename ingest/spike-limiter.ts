// Spike detection: a token bucket per (project, distinct_id). A distinct_id sending realtime
// events faster than the sustained rate (after its burst) has them diverted to OVERFLOW, so
// one hot id cannot hold up its shard. Memory stays bounded: idle buckets are swept.

interface Bucket {
  tokens: number;
  updatedMs: number;
}

export interface SpikeLimiterOptions {
  perSecond: number;
  burst: number;
  /** Hard cap on tracked ids; past it the oldest are forgotten (they start with a full burst). */
  maxTracked?: number;
}

export class SpikeLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxTracked: number;
  private readonly sweepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: SpikeLimiterOptions) {
    this.maxTracked = options.maxTracked ?? 1_000_000;
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

  /** Takes `count` tokens; false (taking none) when the id is over its rate: divert its events. */
  allow(projectId: number, distinctId: string, count: number, nowMs = Date.now()): boolean {
    if (!this.enabled) return true;
    const key = `${projectId}:${distinctId}`;
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.maxTracked) this.evictOldest();
      bucket = { tokens: this.options.burst, updatedMs: nowMs };
      this.buckets.set(key, bucket);
    } else {
      const refill = ((nowMs - bucket.updatedMs) / 1000) * this.options.perSecond;
      bucket.tokens = Math.min(this.options.burst, bucket.tokens + refill);
      bucket.updatedMs = nowMs;
    }
    if (bucket.tokens < count) return false;
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

  private evictOldest(): void {
    // Map iterates in insertion order: the first tenth are the longest-tracked ids.
    let n = Math.ceil(this.maxTracked / 10);
    for (const key of this.buckets.keys()) {
      if (n-- <= 0) break;
      this.buckets.delete(key);
    }
  }
}
