// One project's processed events as a destination reads them: PROCESSED (one stream, whatever
// STREAM_PARTITIONS says) filtered on `processed.<team>.*`, in stream order, from a position on.
// An ephemeral consumer without acks, pulled at most `pullBytes` at a time (what bounds the
// feed's memory; at least one message of NATS's max_payload, or it would never arrive). The
// feed checks the consumer's delivery sequence and opens a new consumer from the last message
// it received on any gap (a connection cut loses what was in flight, and nothing says so), on
// any error, and when the consumer has been quiet while the stream holds more for it.
import { setTimeout as sleep } from 'node:timers/promises';
import { AckPolicy, DeliverPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { exponentialBackoff, STREAMS, type Logger } from '../../../lib/index.js';
import { errorText } from '../../coordination/index.js';

export interface FeedMessage {
  seq: number;
  /** When PROCESSED stored it, ms since the epoch. */
  timeMs: number;
  /** Its NDJSON lines (one processed event each). */
  lines: string[];
  /** Messages of the project the stream holds after this one (the lag). */
  pending: number;
}

export type FeedStart = { afterSeq: number } | { sinceMs: number };

const NANOS_PER_MS = 1_000_000;
/** Quiet this long: ask whether the consumer has anything left to send. */
const QUIET_MS = 5_000;

export class ProcessedFeed {
  private lastSeq: number | undefined;

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly teamId: number,
    private readonly start: FeedStart,
    private readonly pullBytes: number,
    private readonly logger: Logger,
    readonly stream: string = STREAMS.processed,
  ) {}

  /** The messages, in order, until `signal` aborts (then it returns). */
  async *messages(signal: AbortSignal): AsyncGenerator<FeedMessage> {
    let failures = 0;
    while (!signal.aborted) {
      let name: string | undefined;
      try {
        const from: FeedStart = this.lastSeq === undefined ? this.start : { afterSeq: this.lastSeq };
        name = await this.open(from);
        for await (const msg of this.consume(name, signal)) {
          failures = 0;
          yield msg;
        }
      } catch (err) {
        if (signal.aborted) break;
        failures++;
        const wait = exponentialBackoff(250, failures, 10_000);
        this.logger.debug({ teamId: this.teamId, err: errorText(err) }, `PROCESSED feed: opening it again in ${wait} ms`);
        await sleep(wait, undefined, { signal }).catch(() => undefined);
      } finally {
        if (name) await this.jsm.consumers.delete(this.stream, name).catch(() => undefined);
      }
    }
  }

  private async open(from: FeedStart): Promise<string> {
    const info = await this.jsm.consumers.add(this.stream, {
      filter_subject: `processed.${this.teamId}.*`,
      ack_policy: AckPolicy.None,
      inactive_threshold: 60_000 * NANOS_PER_MS,
      mem_storage: true,
      num_replicas: 1,
      ...('afterSeq' in from
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from.afterSeq + 1 }
        : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(from.sinceMs).toISOString() }),
    });
    return info.name;
  }

  /** One consumer's messages; returns (to be opened again) on a gap or a silent consumer with more to send. */
  private async *consume(name: string, signal: AbortSignal): AsyncGenerator<FeedMessage> {
    const consumer = await this.js.consumers.get(this.stream, name);
    const messages = await consumer.consume({ max_bytes: this.pullBytes, expires: 5_000 });
    let quiet: NodeJS.Timeout | undefined;
    let stalled = false;
    let delivered = 0;
    // Armed only while this feed waits for a message (not while its reader is busy with one).
    const watch = () => {
      clearTimeout(quiet);
      quiet = setTimeout(() => {
        void this.hasMore(name, delivered).then((more) => {
          if (more) {
            stalled = true;
            void messages.close();
          } else watch();
        });
      }, QUIET_MS);
    };
    const onAbort = () => void messages.close();
    signal.addEventListener('abort', onAbort, { once: true });
    watch();
    try {
      for await (const msg of messages) {
        clearTimeout(quiet);
        if (msg.info.deliverySequence !== ++delivered) {
          this.logger.warn({ teamId: this.teamId, seq: msg.seq }, 'PROCESSED feed: messages lost in flight, reading again from the last one received');
          return;
        }
        this.lastSeq = msg.seq;
        yield parse(msg);
        watch();
      }
    } finally {
      clearTimeout(quiet);
      signal.removeEventListener('abort', onAbort);
      await messages.close().catch(() => undefined);
    }
    if (stalled) this.logger.warn({ teamId: this.teamId, after: this.lastSeq }, 'PROCESSED feed: the consumer went quiet with messages left, reading again from the last one received');
  }

  /** Whether the consumer has sent (or holds) messages this feed has not received. */
  private async hasMore(name: string, received: number): Promise<boolean> {
    try {
      const info = await this.jsm.consumers.info(this.stream, name);
      return info.num_pending > 0 || info.delivered.consumer_seq > received;
    } catch {
      // Gone (inactive, NATS restarted): a new consumer is the answer either way.
      return true;
    }
  }
}

function parse(msg: JsMsg): FeedMessage {
  const text = new TextDecoder().decode(msg.data);
  const lines = text.split('\n').filter((l) => l.length > 0);
  return { seq: msg.seq, timeMs: Number(msg.timestampNanos / BigInt(NANOS_PER_MS)), lines, pending: msg.info.pending };
}
