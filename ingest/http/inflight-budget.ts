// Memory is bounded by configuration, not traffic: a node holds at most INFLIGHT_BUDGET_BYTES of
// requests (their bodies while they stream in, then their parsed output until it is stored).
import type { IngestMetrics } from '../metrics.js';

/** Bytes of requests in flight on this node; past the budget, new requests get 503. */
export class InflightBudget {
  private used = 0;
  constructor(
    private readonly limit: number,
    private readonly metrics: IngestMetrics,
  ) {}

  /**
   * Takes `bytes` more for a request already holding `held`. Past the limit only a request that
   * is alone in holding budget may go on, so one request larger than the budget still works.
   */
  tryReserve(bytes: number, held = 0): boolean {
    if (this.used + bytes > this.limit && this.used > held) return false;
    this.used += bytes;
    this.metrics.inflightBytes.set(this.used);
    return true;
  }

  release(bytes: number): void {
    this.used -= bytes;
    this.metrics.inflightBytes.set(this.used);
  }
}

/** The share of the budget one request holds: its body while it streams in, then its parsed output. */
export class Reservation {
  private bytes = 0;
  private closed = false;

  constructor(private readonly budget: InflightBudget) {}

  /** More bytes (body chunks); false when the node is at its budget. */
  grow(bytes: number): boolean {
    if (this.closed || !this.budget.tryReserve(bytes, this.bytes)) return false;
    this.bytes += bytes;
    return true;
  }

  /**
   * Holds exactly `bytes` from now on. After parsing, the output replaces the body: a compressed
   * body can decode to far more than its size, and that is what waits for JetStream.
   */
  resize(bytes: number): boolean {
    if (bytes <= this.bytes) {
      this.budget.release(this.bytes - bytes);
      this.bytes = bytes;
      return true;
    }
    return this.grow(bytes - this.bytes);
  }

  release(): void {
    if (this.closed) return;
    this.closed = true;
    this.budget.release(this.bytes);
    this.bytes = 0;
  }
}
