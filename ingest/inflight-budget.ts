// Memory is bounded by configuration, not traffic: a node holds at most INFLIGHT_BUDGET_BYTES of
// requests (their bodies while they stream in, what parse threads decode and produce, then the
// parsed output until it is stored). The count lives in shared memory, so a parse thread takes
// bytes from the same budget before it allocates them (a small gzip can decode to 100 MiB).

/**
 * The node's in-flight byte count, shared with parse threads (pass `shared` to them). The
 * spate_ingest_inflight_bytes gauge reads `usedBytes` when it is scraped.
 */
export class SharedBudget {
  private readonly used: BigInt64Array;
  constructor(
    readonly limit: number,
    readonly shared: SharedArrayBuffer = new SharedArrayBuffer(8),
  ) {
    this.used = new BigInt64Array(shared);
  }

  /** Bytes held now. */
  get usedBytes(): number {
    return Number(Atomics.load(this.used, 0));
  }

  /**
   * Takes `bytes` more for a request already holding `held`. Past the limit only a request that
   * is alone in holding budget may go on, so one request larger than the budget still works.
   */
  tryReserve(bytes: number, held = 0): boolean {
    const add = BigInt(bytes);
    for (;;) {
      const now = Atomics.load(this.used, 0);
      const n = Number(now);
      if (n + bytes > this.limit && n > held) return false;
      if (Atomics.compareExchange(this.used, 0, now, now + add) === now) return true;
    }
  }

  release(bytes: number): void {
    Atomics.sub(this.used, 0, BigInt(bytes));
  }
}

/** The share of the budget one request holds: its body while it streams in, then its parsed output. */
export class Reservation {
  private bytes = 0;
  private closed = false;

  constructor(private readonly budget: SharedBudget) {}

  get held(): number {
    return this.bytes;
  }

  /** Bytes a parse thread reserved for this request in the shared budget: held from now on. */
  adopt(bytes: number): void {
    if (this.closed) this.budget.release(bytes);
    else this.bytes += bytes;
  }

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
