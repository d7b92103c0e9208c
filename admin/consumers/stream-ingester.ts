// Stores what workers write to a JetStream stream (log entries, run updates) in PostgreSQL, in
// batches, at least once: a message is acknowledged only after its lines are stored, and the
// sink's inserts are idempotent (by entry id or run identity), so redelivery never duplicates.
//
// All admin replicas share one durable pull consumer, so each message goes to one of them at a
// time. A reader parses messages as they arrive into a queue; a writer stores whatever the queue
// holds (up to LOG_BATCH_ROWS per INSERT) whenever it is free. So a trickle is stored at once,
// and during a burst each INSERT takes everything that arrived while the previous one ran. The
// reader waits when the queue is full, so memory stays bounded. PostgreSQL down: the batch is
// retried (its ack deadline extended) and the queue fills up and stops the reader.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import { exponentialBackoff, Counter, type Logger, type NatsConnection, type Registry } from '../../lib/index.js';
import type { Pool } from '../db/pool.js';

const NANOS = 1_000_000;
/** Redelivery after this long without an ack (a batch in progress extends it). */
const ACK_WAIT_MS = 60_000;
/** Messages pulled ahead into the client buffer. */
const PULL_MESSAGES = 100;

export interface SinkResult {
  /** Rows written now. */
  stored: number;
  /** Rows already stored before (redelivery), or naming something that no longer exists. */
  skipped: number;
}

export interface Sink<Row> {
  /** For logs and metric labels, e.g. "plugin_logs". */
  readonly name: string;
  readonly stream: string;
  readonly durable: string;
  /** The rows of one message; invalid lines are counted, never thrown. */
  parse(msg: JsMsg): { rows: Row[]; invalid: number };
  /** Stores rows idempotently (at most `batchRows` per call); throws when PostgreSQL failed. */
  write(pool: Pool, rows: Row[]): Promise<SinkResult>;
}

export interface IngesterOptions {
  /** Most rows stored by one write. */
  batchRows: number;
}

interface Parsed<Row> {
  msg: JsMsg;
  rows: Row[];
}

export class StreamIngester<Row> {
  private messages: ConsumerMessages | undefined;
  private loops: Promise<unknown> | undefined;
  private stopped = false;
  /** Cuts a retry pause short when stopping. */
  private readonly stopping = new AbortController();
  private readerDone = false;
  private readonly queue: Array<Parsed<Row>> = [];
  private queuedRows = 0;
  private wakeWriter: (() => void) | undefined;
  private wakeReader: (() => void) | undefined;
  private readonly lines: Counter<'sink' | 'outcome'>;

  constructor(
    private readonly nc: NatsConnection,
    private readonly pool: Pool,
    private readonly sink: Sink<Row>,
    private readonly log: Logger,
    metrics: Registry,
    private readonly options: IngesterOptions,
  ) {
    const name = 'spate_admin_stream_lines_total';
    this.lines =
      (metrics.getSingleMetric(name) as Counter<'sink' | 'outcome'> | undefined) ??
      new Counter({
        name,
        help: 'Lines read from worker streams (plugin logs, batch export runs and logs), by sink and outcome: stored, skipped (already stored, or of something deleted), invalid',
        labelNames: ['sink', 'outcome'] as const,
        registers: [metrics],
      });
  }

  /** Creates the durable consumer if needed and starts consuming. */
  async start(): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const config = {
      durable_name: this.sink.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: ACK_WAIT_MS * NANOS,
      max_ack_pending: 20_000,
    };
    try {
      await jsm.consumers.info(this.sink.stream, this.sink.durable);
    } catch (err) {
      if (!(err instanceof JetStreamApiError) || err.status !== 404) throw err;
      try {
        await jsm.consumers.add(this.sink.stream, config);
      } catch (addErr) {
        // Another replica created it at the same moment: fine.
        await jsm.consumers.info(this.sink.stream, this.sink.durable).catch(() => {
          throw addErr;
        });
      }
    }
    const consumer = await jetstream(this.nc).consumers.get(this.sink.stream, this.sink.durable);
    this.messages = await consumer.consume({ max_messages: PULL_MESSAGES });
    const failed = (err: unknown) => this.log.error({ err, sink: this.sink.name }, 'stream consumer stopped');
    this.loops = Promise.all([this.read(this.messages).catch(failed), this.write().catch(failed)]);
  }

  /** Stops pulling and finishes the batch in progress; unacknowledged messages go to another replica. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    this.messages?.stop();
    this.wakeReader?.();
    await this.loops;
  }

  private async read(messages: ConsumerMessages): Promise<void> {
    try {
      for await (const msg of messages) {
        const parsed = this.sink.parse(msg);
        if (parsed.invalid > 0) {
          this.lines.inc({ sink: this.sink.name, outcome: 'invalid' }, parsed.invalid);
          this.log.warn({ sink: this.sink.name, subject: msg.subject, seq: msg.seq, invalid: parsed.invalid }, 'dropped invalid lines');
        }
        this.queue.push({ msg, rows: parsed.rows });
        this.queuedRows += parsed.rows.length;
        this.wakeWriter?.();
        while (this.queuedRows >= 2 * this.options.batchRows && !this.stopped) await new Promise<void>((r) => (this.wakeReader = r));
        if (this.stopped) break;
      }
    } finally {
      this.readerDone = true;
      this.wakeWriter?.();
    }
  }

  private async write(): Promise<void> {
    for (;;) {
      if (this.queue.length === 0) {
        if (this.readerDone) return;
        await new Promise<void>((r) => (this.wakeWriter = r));
        continue;
      }
      const batch: JsMsg[] = [];
      const rows: Row[] = [];
      while (this.queue.length > 0 && (batch.length === 0 || rows.length + this.queue[0]!.rows.length <= this.options.batchRows)) {
        const next = this.queue.shift()!;
        batch.push(next.msg);
        // One message may hold more lines than a spread can pass as arguments.
        for (const row of next.rows) rows.push(row);
      }
      await this.store(batch, rows);
      this.queuedRows -= rows.length;
      this.wakeReader?.();
    }
  }

  /** Stores the rows of `batch`, retrying while PostgreSQL fails, then acknowledges the messages. */
  private async store(batch: JsMsg[], rows: Row[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        for (let i = 0; i < rows.length; i += this.options.batchRows) {
          const result = await this.sink.write(this.pool, rows.slice(i, i + this.options.batchRows));
          this.lines.inc({ sink: this.sink.name, outcome: 'stored' }, result.stored);
          this.lines.inc({ sink: this.sink.name, outcome: 'skipped' }, result.skipped);
        }
        break;
      } catch (err) {
        if (this.stopped) return; // not acknowledged: redelivered to whoever consumes next
        this.log.warn({ err, sink: this.sink.name, attempt }, 'could not store stream lines; retrying');
        for (const msg of batch) msg.working();
        await sleep(exponentialBackoff(250, attempt, 30_000), undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
    for (const msg of batch) msg.ack();
  }
}
