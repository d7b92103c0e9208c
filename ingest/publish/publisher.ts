// Publishes packed NDJSON messages to JetStream and tells each request when all of its events
// are stored. Group commit per subject: while a subject's message awaits its PubAck, newly
// arriving events of that subject pile up in the next message, so small concurrent requests
// coalesce for about one ack round trip — and not at all when idle.
//
// Order per subject is the order events were enqueued: one message in flight per subject
// (PUBLISH_MAX_INFLIGHT_PER_SUBJECT, default 1) means a retried message can never land behind a
// later one, and when a message finally fails, everything queued behind it on that subject fails
// too (those requests get 503 and are retried by their clients) rather than overtaking it.
//
// Items that lie side by side in one buffer (a request's segments for one subject) join as one
// view of it, so a message made of them is sent without a copy.
//
// An item with its own message id (historical events: parse/line-packer.ts) is sent as one message
// under that id, never merged with others, so sending the same events again is a duplicate
// JetStream drops.
import { randomBytes } from 'node:crypto';
import type { JetStreamClient } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { exponentialBackoff, HEADER_EVENT_COUNT, type Logger } from '../../lib/index.js';
import { CaptureError } from '../errors.js';
import { fitsInMessage } from '../message-size.js';
import type { IngestMetrics } from '../metrics.js';

export interface PublishItem {
  subject: string;
  data: Uint8Array;
  count: number;
  /** Nats-Msg-Id derived from the events: sent alone, under this id. */
  msgId?: string;
}

export interface PublisherOptions {
  /** From messageSizeLimit (message-size.ts). */
  maxMessageBytes: number;
  maxInflightPerSubject: number;
  ackTimeoutMs: number;
  attempts: number;
  retryAfterSeconds: number;
}

/**
 * The pause after a failed attempt: 50 ms, doubling to at most 1 s. While a stream elects a new
 * leader (~0.3 s after a step-down, more on a loaded host) publishes fail at once with "no
 * responders"; the default 6 attempts wait ≈1.5 s in all, so an election costs latency, not a 503.
 */
export function retryDelayMs(attempt: number): number {
  return exponentialBackoff(50, attempt - 1, 1_000);
}

/** One request waiting for the messages that carry its events. */
class Tracker {
  remaining = 0;
  settled = false;
  constructor(
    readonly resolve: () => void,
    readonly reject: (err: CaptureError) => void,
  ) {}

  done(): void {
    if (this.settled || --this.remaining > 0) return;
    this.settled = true;
    this.resolve();
  }

  fail(err: CaptureError): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(err);
  }
}

interface Batch {
  chunks: Uint8Array[];
  bytes: number;
  count: number;
  trackers: Set<Tracker>;
  /** Set for a sealed item's message; otherwise an id is made when it is sent. */
  msgId?: string;
}

interface SubjectQueue {
  subject: string;
  open: Batch | undefined;
  /** Full batches waiting for an in-flight slot. */
  ready: Batch[];
  inflight: number;
}

const newBatch = (): Batch => ({ chunks: [], bytes: 0, count: 0, trackers: new Set() });

export class EventPublisher {
  private readonly queues = new Map<string, SubjectQueue>();
  private readonly dirty = new Set<SubjectQueue>();
  private pumpScheduled = false;
  private readonly idPrefix = randomBytes(9).toString('base64url');
  private sequence = 0;
  private inflightMessages = 0;
  private idleWaiters: (() => void)[] = [];
  private connected = true;

  constructor(
    private readonly js: JetStreamClient,
    private readonly options: PublisherOptions,
    private readonly metrics: IngestMetrics,
    private readonly log: Logger,
  ) {}

  /** NATS connection state: while disconnected, requests fail fast with 503 instead of hanging. */
  setConnected(connected: boolean): void {
    this.connected = connected;
    if (!connected) {
      const err = this.unavailable('NATS connection lost');
      for (const queue of this.queues.values()) {
        for (const batch of [...queue.ready, ...(queue.open ? [queue.open] : [])]) {
          for (const t of batch.trackers) t.fail(err);
        }
        queue.ready = [];
        queue.open = undefined;
      }
      this.checkIdle();
    }
  }

  /** Resolves when every event of `items` is acknowledged by JetStream; rejects with a 503 CaptureError otherwise. */
  publish(items: readonly PublishItem[]): Promise<void> {
    if (items.length === 0) return Promise.resolve();
    if (!this.connected) return Promise.reject(this.unavailable('NATS connection lost'));
    return new Promise<void>((resolve, reject) => {
      const tracker = new Tracker(resolve, reject);
      for (const item of items) this.enqueue(item, tracker);
      this.schedulePump();
    });
  }

  /** Resolves once nothing is pending or in flight (for shutdown). */
  async idle(): Promise<void> {
    if (this.isIdle()) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    if (this.inflightMessages > 0) return false;
    for (const q of this.queues.values()) if (q.open || q.ready.length > 0) return false;
    return true;
  }

  private checkIdle(): void {
    if (this.idleWaiters.length === 0 || !this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private enqueue(item: PublishItem, tracker: Tracker): void {
    let queue = this.queues.get(item.subject);
    if (!queue) {
      queue = { subject: item.subject, open: undefined, ready: [], inflight: 0 };
      this.queues.set(item.subject, queue);
    }
    let batch = queue.open;
    if (item.msgId !== undefined) {
      // After whatever is open, in order; nothing joins it.
      if (batch) queue.ready.push(batch);
      queue.open = undefined;
      const sealed: Batch = { chunks: [item.data], bytes: item.data.length, count: item.count, trackers: new Set([tracker]), msgId: item.msgId };
      tracker.remaining++;
      queue.ready.push(sealed);
      this.dirty.add(queue);
      return;
    }
    if (batch && !fitsInMessage(batch.bytes + item.data.length, this.options.maxMessageBytes)) {
      queue.ready.push(batch);
      batch = undefined;
    }
    if (!batch) {
      batch = newBatch();
      queue.open = batch;
    }
    const last = batch.chunks[batch.chunks.length - 1];
    if (last && last.buffer === item.data.buffer && last.byteOffset + last.length === item.data.byteOffset) {
      batch.chunks[batch.chunks.length - 1] = new Uint8Array(last.buffer, last.byteOffset, last.length + item.data.length);
    } else {
      batch.chunks.push(item.data);
    }
    batch.bytes += item.data.length;
    batch.count += item.count;
    if (!batch.trackers.has(tracker)) {
      batch.trackers.add(tracker);
      tracker.remaining++;
    }
    this.dirty.add(queue);
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    // Everything that arrives in this turn of the event loop shares messages.
    setImmediate(() => {
      this.pumpScheduled = false;
      const queues = [...this.dirty];
      this.dirty.clear();
      for (const q of queues) this.pump(q);
    });
  }

  private pump(queue: SubjectQueue): void {
    while (queue.inflight < this.options.maxInflightPerSubject) {
      let batch = queue.ready.shift();
      if (!batch && queue.open) {
        batch = queue.open;
        queue.open = undefined;
      }
      if (!batch) break;
      queue.inflight++;
      this.inflightMessages++;
      void this.send(queue, batch);
    }
  }

  private async send(queue: SubjectQueue, batch: Batch): Promise<void> {
    const data = batch.chunks.length === 1 ? batch.chunks[0]! : Buffer.concat(batch.chunks, batch.bytes);
    const msgID = batch.msgId ?? `${this.idPrefix}.${(this.sequence++).toString(36)}`;
    const hdrs = natsHeaders();
    hdrs.set(HEADER_EVENT_COUNT, String(batch.count));
    const started = performance.now();
    let failure: unknown;
    for (let attempt = 1; attempt <= this.options.attempts; attempt++) {
      if (!this.connected) {
        failure = new Error('NATS connection lost');
        break;
      }
      try {
        // The same Nats-Msg-Id on every attempt: if an earlier attempt was stored after all,
        // JetStream drops the retry as a duplicate.
        const ack = await this.js.publish(queue.subject, data, { msgID, headers: hdrs, timeout: this.options.ackTimeoutMs });
        if (ack.duplicate) this.metrics.publishDuplicates.inc();
        failure = undefined;
        break;
      } catch (err) {
        failure = err;
        this.metrics.publishRetries.inc();
        this.log.warn({ err, subject: queue.subject, attempt }, 'JetStream publish failed');
        if (attempt < this.options.attempts) await new Promise((r) => setTimeout(r, retryDelayMs(attempt)));
      }
    }
    this.metrics.publishLatency.observe((performance.now() - started) / 1000);
    queue.inflight--;
    this.inflightMessages--;
    if (failure === undefined) {
      this.metrics.messagesPublished.inc();
      this.metrics.eventsPublished.inc(batch.count);
      for (const t of batch.trackers) t.done();
    } else {
      this.metrics.publishFailures.inc();
      const err = this.unavailable(failure instanceof Error ? failure.message : 'publish failed');
      const behind = [...queue.ready, ...(queue.open ? [queue.open] : [])];
      queue.ready = [];
      queue.open = undefined;
      for (const b of [batch, ...behind]) for (const t of b.trackers) t.fail(err);
    }
    this.pump(queue);
    if (!queue.open && queue.ready.length === 0 && queue.inflight === 0) this.queues.delete(queue.subject);
    this.checkIdle();
  }

  private unavailable(reason: string): CaptureError {
    return new CaptureError('unavailable', `transient error, please retry (${reason})`, {
      headers: { 'Retry-After': String(this.options.retryAfterSeconds) },
    });
  }
}
