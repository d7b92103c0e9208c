// Lanes keep per-distinct_id order while several batches are in flight. Every record goes to
// lane fnv1a32(distinct_id) mod N; a lane sends one batch at a time, in file order, and sends
// the next only after capture acknowledged the previous. So two batches holding the same
// distinct_id are never in flight at once, and N lanes give N requests in flight.
// Each lane holds an open batch being filled and at most `maxQueued` sealed ones; when those
// are full the reader waits (backpressure bounds memory to lanes × (maxQueued + 2) batches).
// Resuming, a lane first rebuilds the batch it had in flight (`replayUntil`): exactly its records,
// whatever the batch size now, so it is the same request as before.
import { fnv1a32 } from '../../lib/index.js';
import { itemSize, type BatchItem } from './batch.js';

export function laneOf(distinctId: string, lanes: number): number {
  return fnv1a32(distinctId) % lanes;
}

export class Lane {
  private open: BatchItem[] = [];
  private openBytes = 0;
  /** performance.now() when the open batch got its first item. */
  openedAt = 0;
  private readonly queue: BatchItem[][] = [];
  private spaceWaiters: (() => void)[] = [];
  private idleWaiters: (() => void)[] = [];
  private running = false;
  private halted = false;

  constructor(
    readonly index: number,
    private readonly maxQueued: number,
    /** Whether a batch of `count` items adding up to `bytes` is within the batch size. */
    private readonly fits: (count: number, bytes: number) => boolean,
    /** Sends a batch until it is acknowledged or the import stops; never throws. */
    private readonly deliver: (items: BatchItem[]) => Promise<void>,
    /** Last position of the batch in flight when the previous run stopped. */
    private replayUntil?: number,
  ) {}

  /** Still rebuilding the batch that was in flight (it must not be cut short). */
  get replaying(): boolean {
    return this.replayUntil !== undefined;
  }

  /** Adds a record; returns a promise only when the reader must wait for room. */
  add(item: BatchItem): Promise<void> | undefined {
    if (this.replayUntil !== undefined) {
      if (item.position <= this.replayUntil) {
        this.push(item);
        return undefined;
      }
      this.replayUntil = undefined;
      const wait = this.seal();
      if (wait) return wait.then(() => this.push(item));
      this.push(item);
      return undefined;
    }
    if (this.open.length > 0 && !this.fits(this.open.length + 1, this.openBytes + itemSize(item))) {
      const wait = this.seal();
      if (wait) return wait.then(() => this.push(item));
    }
    this.push(item);
    return undefined;
  }

  get pending(): number {
    return this.open.length;
  }

  /** Nothing queued or in flight (the open batch may hold records). */
  get idle(): boolean {
    return !this.running && this.queue.length === 0;
  }

  /** Moves the open batch to the send queue; returns a promise when the queue is full. */
  seal(): Promise<void> | undefined {
    if (this.open.length === 0) return undefined;
    if (this.halted) {
      this.open = []; // not sent: the checkpoint does not cover these, a re-run sends them
      this.openBytes = 0;
      return undefined;
    }
    if (this.queue.length >= this.maxQueued) {
      return new Promise<void>((resolve) => this.spaceWaiters.push(resolve)).then(() => this.seal());
    }
    this.queue.push(this.open);
    this.open = [];
    this.openBytes = 0;
    this.kick();
    return undefined;
  }

  /** Stops sending queued batches (the one in flight finishes); wakes a waiting reader. */
  halt(): void {
    this.halted = true;
    this.queue.length = 0;
    this.wakeSpace();
    this.checkIdle();
  }

  /** Resolves when nothing is queued or in flight. */
  drained(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private push(item: BatchItem): void {
    if (this.open.length === 0) this.openedAt = performance.now();
    this.open.push(item);
    this.openBytes += itemSize(item);
  }

  private kick(): void {
    if (this.running || this.halted) return;
    this.running = true;
    void this.drive();
  }

  private async drive(): Promise<void> {
    while (!this.halted) {
      const items = this.queue.shift();
      if (!items) break;
      this.wakeSpace();
      await this.deliver(items);
    }
    this.running = false;
    this.checkIdle();
  }

  private wakeSpace(): void {
    const waiters = this.spaceWaiters;
    this.spaceWaiters = [];
    for (const w of waiters) w();
  }

  private checkIdle(): void {
    if (!this.idle) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}
