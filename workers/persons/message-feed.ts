// One (stream, shard) read in stream order from a start sequence: an ordered consumer (it
// re-creates itself after gaps and NATS restarts) pumped into a bounded buffer, from which the
// processor takes whatever has arrived. Under load batches grow; idle, they stay small and quick.
//
// An ordered consumer can also go silent for good: messages the server sent just before it cut
// the connection (a slow consumer) are never sent again (no acks), and nats.js resumes pulling
// without noticing the gap; a message bigger than a pull asks for is never delivered at all. So
// the partition probes the stream when a feed has been quiet (stall-probe.ts) and opens
// a new feed when something is there that never arrived.
//
// A consumer reads the stream from the replica it is placed on, and a replica can differ from the
// leader for good: with nats-server 2.9.10 a stream leader cut off by a partition while its
// clients publish comes back as a desynchronised replica (test/multihost, partitioning the EVENTS
// leader: ordered consumers placed on it after the heal missed hundreds of the leader's messages,
// 15 s later too, with the replica reported current). A feed reading there would move its
// position past events it never saw. So every consumer the feed gets (nats.js re-creates an ordered
// consumer by itself after a gap or a reconnection) is checked before any message of it is taken:
// one not on the stream leader is replaced by a new one, placed anew.
//
// consume(), not a fetch() per batch: nats-server 2.9 holds a pull until it is full or expires,
// and nats.js 3 refuses an expiry under 1 s (no no_wait), so at moderate rates a fetch loop
// delivered each batch up to a second (measured: seconds) late where this feed takes a
// millisecond; it still needed its own handling of messages lost in flight and of messages
// bigger than a pull, so it was neither simpler nor as fast (checked again 2026-11-28).
import type { ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { HEADER_EVENT_COUNT } from '../../lib/index.js';

export interface FeedOptions {
  stream: string;
  filterSubject: string;
  startSeq: number;
  /** Bytes the consumer asks JetStream for ahead of processing. */
  fetchMaxBytes: number;
  /**
   * Largest message expected: every pull has room for one (a bigger one would never be
   * delivered). Kept small, since all of a worker's pulls share one connection whose unread
   * bytes the server bounds (max_pending); a bigger message is found by the stall probe.
   */
  messageMaxBytes: number;
  /** The pump stops reading when this much is buffered (memory bound per shard). */
  bufferMaxBytes: number;
  /** Called each time the feed goes on with a new consumer after a pull ended short. */
  onResume?: () => void;
}

export interface TakeLimits {
  maxEvents: number;
  maxBytes: number;
  /** Take nothing past this sequence (replaying a planned batch exactly). */
  untilSeq?: number;
}

/**
 * How long a feed waits for a message after a pull ended short before going on with a new consumer.
 * Short: each wait is a shard standing still (70-73 per million events in the worker bench). The
 * decision is taken after the event loop has read what arrived meanwhile (see watchPullsEndingShort),
 * so a loop busy for longer than this is mostly not taken for silence.
 */
const RESUME_AFTER_MS = 50;

/** Consumers in a row placed off the stream leader before the feed gives up (1 in ~57 with 3 replicas at random). */
const MAX_MISPLACED = 10;

export class MessageFeed {
  private messages: ConsumerMessages | undefined;
  private readonly buffer: JsMsg[] = [];
  private bufferedBytes = 0;
  private closed = false;
  private failure: unknown;
  private wakeReader: (() => void) | undefined;
  private wakePump: (() => void) | undefined;
  private pumping: Promise<void> = Promise.resolve();
  /** Stream sequence of the last message received, and when (performance.now()). */
  lastSeq: number;
  lastReceivedAt = performance.now();
  /** When the oldest message in the buffer arrived (performance.now()). */
  firstBufferedAt = 0;
  /** Messages after the last received one, as the server counted when it sent it. */
  private pendingAfterLast = 0;
  /** The pump reads on past bufferMaxBytes until this sequence has arrived (a planned batch). */
  private fillUntilSeq = 0;
  /** Bumped for every consumer: a pump or watcher of an older one stops. */
  private generation = 0;
  private resumeTimer: NodeJS.Timeout | undefined;
  private resumeWatch = 0;
  private stopWatching: (() => void) | undefined;
  /** The consumer whose messages are taken: found on the stream leader. */
  private checkedConsumer: string | undefined;
  private misplaced = 0;
  private jsm: JetStreamManager | undefined;

  constructor(private readonly js: JetStreamClient, private readonly options: FeedOptions) {
    this.lastSeq = options.startSeq - 1;
  }

  async open(): Promise<void> {
    await this.consumeFrom(this.options.startSeq);
  }

  /** A new ordered consumer from `startSeq`, pumped into the buffer; the one before it is forgotten. */
  private async consumeFrom(startSeq: number): Promise<void> {
    const o = this.options;
    const generation = ++this.generation;
    const consumer = await this.js.consumers.get(o.stream, { filter_subjects: o.filterSubject, opt_start_seq: startSeq });
    // A pull asks for max_bytes less what is in flight, and a message larger than what a pull asks
    // for is never delivered (409, the consumer stalls). Refilling only when at most fetchMaxBytes
    // are in flight makes every pull ask for at least one whole message of messageMaxBytes.
    const messages = await consumer.consume({
      max_bytes: o.fetchMaxBytes + o.messageMaxBytes + 64 * 1024,
      threshold_bytes: o.fetchMaxBytes,
      expires: 5_000,
    });
    if (this.closed) {
      // Closed while this consumer was being made (a resume racing close()).
      await messages.close().catch(() => undefined);
      return;
    }
    this.messages = messages;
    this.pumping = this.pump(messages, generation);
    void this.watchPullsEndingShort(messages, generation);
  }

  /**
   * A waiting pull with no room left for the next message is ended by the server with a 409
   * ("message size exceeds maxbytes"). Arriving with nothing queued, nats.js pulls again only after
   * two idle heartbeats are missed (half the expiry each): the shard stood still for 5-7.5 s, a few
   * times a minute under load (2026-11-24: end-to-end p99 lag of 4-5 s). So when such a 409 is
   * followed by RESUME_AFTER_MS without a message, the feed goes on from the next sequence with a
   * new consumer, keeping what it has buffered. (A short heartbeat instead would also fire while
   * the pump is held back, every time queueing one more full pull.)
   */
  private async watchPullsEndingShort(messages: ConsumerMessages, generation: number): Promise<void> {
    const statuses = messages.status();
    // Ends the loop below when this consumer is replaced or the feed closes (nats.js stops status
    // iterators only from its message iterator, which a replaced pump no longer reads).
    this.stopWatching = () => (statuses as Partial<{ stop(): void }>).stop?.();
    for await (const s of statuses) {
      if (s.type !== 'exceeded_limits' || generation !== this.generation) continue;
      const seqAtLimit = this.lastSeq;
      // The latest such 409 alone is followed up: an older check (its timer already fired, its
      // setImmediate pending) neither resumes nor re-arms.
      const watch = ++this.resumeWatch;
      clearTimeout(this.resumeTimer);
      const check = () => {
        if (watch !== this.resumeWatch || generation !== this.generation || this.closed || this.lastSeq !== seqAtLimit) return;
        // Held back, the pump is not asking for more anyway: look again once it reads on.
        if (this.holdingBack()) this.resumeTimer = setTimeout(later, RESUME_AFTER_MS);
        else void this.resume();
      };
      // Timers run before I/O in each turn of the event loop: after a long synchronous stretch the
      // timer would fire before the socket's waiting bytes are read. setImmediate decides after one
      // read of them (what the kernel buffered; a large backlog may still be partly unread, which
      // costs at most a consumer made again).
      const later = () => setImmediate(check);
      this.resumeTimer = setTimeout(later, RESUME_AFTER_MS);
    }
  }

  private async resume(): Promise<void> {
    const old = this.messages;
    this.generation++; // the old pump pushes nothing more (consumeFrom counts on from here)
    this.options.onResume?.();
    this.stopWatching?.();
    try {
      await old?.close();
    } catch {
      // already closed: nothing to release
    }
    try {
      await this.consumeFrom(this.lastSeq + 1);
    } catch (err) {
      // Ends the feed: the processor opens a new one from the committed position.
      this.failure = err;
      this.closed = true;
      this.wake();
    }
  }

  private holdingBack(): boolean {
    return this.bufferedBytes >= this.options.bufferMaxBytes && this.lastSeq >= this.fillUntilSeq;
  }

  private async pump(messages: ConsumerMessages, generation: number): Promise<void> {
    try {
      for await (const m of messages) {
        if (generation !== this.generation) break;
        if (m.info.consumer !== this.checkedConsumer) {
          if (!(await this.onStreamLeader(m.info.consumer))) {
            // Nothing of it is taken: a new consumer goes on from the last message kept. Placement
            // is at random among the replicas; should it keep missing, the feed ends and the
            // partition opens a new one after its backoff.
            if (++this.misplaced > MAX_MISPLACED) throw new Error(`${MAX_MISPLACED} consumers in a row were placed off the stream leader`);
            void this.resume();
            break;
          }
          this.misplaced = 0;
          this.checkedConsumer = m.info.consumer;
        }
        this.lastSeq = m.seq;
        this.lastReceivedAt = performance.now();
        this.pendingAfterLast = m.info.pending;
        if (this.buffer.length === 0) this.firstBufferedAt = this.lastReceivedAt;
        this.buffer.push(m);
        this.bufferedBytes += m.data.length;
        this.wake();
        // Stop pulling (the consumer only asks for more when its iterator is read) until the processor catches up.
        while (this.holdingBack() && !this.closed && generation === this.generation) {
          await new Promise<void>((resolve) => (this.wakePump = resolve));
        }
        if (this.closed) break;
      }
    } catch (err) {
      if (generation === this.generation) this.failure = err;
    } finally {
      // A consumer replaced by resume() ends quietly; the feed goes on with the new one.
      if (generation === this.generation) {
        this.closed = true;
        this.wake();
      }
    }
  }

  /**
   * Whether the consumer is placed on the stream's leader. A stream without replicas has one copy,
   * read by every consumer (nats-server 2.10 names a standalone server as its leader but gives its
   * consumers no cluster at all).
   */
  private async onStreamLeader(consumer: string): Promise<boolean> {
    this.jsm ??= await this.js.jetstreamManager(false);
    const [stream, placed] = await Promise.all([this.jsm.streams.info(this.options.stream), this.jsm.consumers.info(this.options.stream, consumer)]);
    if (!stream.cluster?.replicas?.length) return true;
    return placed.cluster?.leader === stream.cluster.leader;
  }

  private wake(): void {
    const w = this.wakeReader;
    this.wakeReader = undefined;
    w?.();
  }

  /** False once the consumer ended: nothing more will be buffered. */
  get receiving(): boolean {
    return !this.closed;
  }

  /** True when the consumer ended (stopped, or failed: see `error`). */
  get ended(): boolean {
    return this.closed && this.buffer.length === 0;
  }

  get error(): unknown {
    return this.failure;
  }

  /** Resolves when a message is buffered or the feed ended, or after `timeoutMs`. */
  async waitForMessages(timeoutMs: number): Promise<void> {
    if (this.buffer.length > 0 || this.closed) return;
    await this.waitForMore(timeoutMs);
  }

  /** Resolves when the next message is buffered, the feed ends or is interrupted, or after `timeoutMs`. */
  async waitForMore(timeoutMs: number): Promise<void> {
    if (this.closed) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.wakeReader = resolve;
      timer = setTimeout(resolve, timeoutMs);
    });
    clearTimeout(timer);
    this.wakeReader = undefined;
  }

  /** Ends a wait for messages at once: the reader is stopping. */
  interrupt(): void {
    this.wakeReader?.();
  }

  /** Lets the buffer grow past its bound until `seq` has arrived: a planned batch must be taken whole. */
  fillThrough(seq: number): void {
    if (seq <= this.fillUntilSeq) return;
    this.fillUntilSeq = seq;
    const w = this.wakePump;
    this.wakePump = undefined;
    w?.();
  }

  /** Messages of the shard not yet processed: buffered, plus what the server had left after the last one it sent. */
  lag(): number {
    return this.buffer.length + this.pendingAfterLast;
  }

  /** Last buffered message, to see how far the stream goes without taking anything. */
  peekLast(): JsMsg | undefined {
    return this.buffer[this.buffer.length - 1];
  }

  /** Whether what is buffered reaches either limit: a batch taken now would be full. */
  fills(limits: Pick<TakeLimits, 'maxEvents' | 'maxBytes'>): boolean {
    let events = 0;
    for (const m of this.buffer) {
      events += eventCountOf(m);
      if (events >= limits.maxEvents) return true;
    }
    return this.bufferedBytes >= limits.maxBytes;
  }

  /** The sequence `take(limits)` would end at now, without taking anything (undefined: nothing buffered). */
  peekEnd(limits: TakeLimits): number | undefined {
    let events = 0;
    let bytes = 0;
    let end: number | undefined;
    for (const m of this.buffer) {
      const n = eventCountOf(m);
      if (end !== undefined && (events + n > limits.maxEvents || bytes + m.data.length > limits.maxBytes)) break;
      events += n;
      bytes += m.data.length;
      end = m.seq;
    }
    return end;
  }

  /** Takes buffered messages in order within the limits (always at least one when any is buffered). */
  take(limits: TakeLimits): JsMsg[] {
    const out: JsMsg[] = [];
    let events = 0;
    let bytes = 0;
    while (this.buffer.length > 0) {
      const m = this.buffer[0]!;
      if (limits.untilSeq !== undefined && m.seq > limits.untilSeq) break;
      const n = eventCountOf(m);
      if (out.length > 0 && (events + n > limits.maxEvents || bytes + m.data.length > limits.maxBytes)) break;
      this.buffer.shift();
      out.push(m);
      events += n;
      bytes += m.data.length;
    }
    this.bufferedBytes -= bytes;
    // What is left arrived before now: it is not kept waiting again.
    if (this.buffer.length > 0) this.firstBufferedAt = 0;
    if (this.bufferedBytes < this.options.bufferMaxBytes) {
      const w = this.wakePump;
      this.wakePump = undefined;
      w?.();
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.resumeTimer);
    this.stopWatching?.();
    const w = this.wakePump;
    this.wakePump = undefined;
    w?.();
    this.wake();
    try {
      await this.messages?.close();
    } catch {
      // already closed, or the connection is gone: nothing left to release
    }
    await this.pumping;
  }
}

/** Events in a message: the Spate-Events header, else its line count. */
export function eventCountOf(m: JsMsg): number {
  const header = m.headers?.get(HEADER_EVENT_COUNT);
  const n = header ? Number(header) : NaN;
  if (Number.isInteger(n) && n > 0) return n;
  let lines = 0;
  for (let i = 0; i < m.data.length; i++) if (m.data[i] === 0x0a) lines++;
  return Math.max(1, lines + (m.data.length > 0 && m.data[m.data.length - 1] !== 0x0a ? 1 : 0));
}
