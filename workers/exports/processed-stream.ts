// What runs read: PROCESSED, one project's subjects (`processed.<team>.*`), between stream
// sequences. Times map to sequences with a consumer delivering by start time (the first
// message of the project stored at or after it), so a run's range is fixed by sequences and a
// rerun reads exactly the same messages, whatever the clocks say. Reads go through an
// ephemeral consumer without acks, pulled in slices of at most `pullBytes` (the memory bound of
// a read), and fail (to be retried) on any gap in the consumer's delivery sequence.
import { AckPolicy, DeliverPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { STREAMS } from '../../lib/index.js';
import { ExportError } from './errors.js';

export interface StreamBounds {
  firstSeq: number;
  lastSeq: number;
  /** When the stream's first message was stored (ms), undefined when it is empty. */
  firstTimeMs: number | undefined;
}

export interface ProcessedMessage {
  seq: number;
  /** When PROCESSED stored the message, microseconds since the epoch. */
  timeUs: number;
  /** Its NDJSON lines (records.ts, processedLines; formats/event-lines.ts). */
  data: Uint8Array;
}

const NANOS_PER_MS = 1_000_000;
/** A read that receives nothing for this long while messages are pending fails (and is retried). */
const SILENCE_MS = 30_000;

export class ProcessedStream {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly pullBytes: number,
    readonly stream: string = STREAMS.processed,
  ) {}

  async bounds(): Promise<StreamBounds> {
    const { state } = await this.jsm.streams.info(this.stream);
    return {
      firstSeq: state.first_seq,
      lastSeq: state.last_seq,
      firstTimeMs: state.messages > 0 ? Date.parse(state.first_ts) : undefined,
    };
  }

  private filter(teamId: number): string {
    return `processed.${teamId}.*`;
  }

  private async ephemeral(teamId: number, start: { seq: number } | { timeMs: number }) {
    const info = await this.jsm.consumers.add(this.stream, {
      filter_subject: this.filter(teamId),
      ack_policy: AckPolicy.None,
      inactive_threshold: 60_000 * NANOS_PER_MS,
      mem_storage: true,
      num_replicas: 1,
      ...('seq' in start
        ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start.seq }
        : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(start.timeMs).toISOString() }),
    });
    return info;
  }

  private async remove(name: string): Promise<void> {
    await this.jsm.consumers.delete(this.stream, name).catch(() => undefined);
  }

  /** The sequence of the project's first message stored at or after `timeMs`; undefined when there is none yet. */
  async firstSeqAtOrAfter(teamId: number, timeMs: number): Promise<number | undefined> {
    const info = await this.ephemeral(teamId, { timeMs });
    try {
      if (info.num_pending === 0) return undefined;
      const consumer = await this.js.consumers.get(this.stream, info.name);
      const msg = await consumer.next({ expires: 5_000 });
      if (!msg) throw new ExportError('internal', `PROCESSED did not deliver the message at ${new Date(timeMs).toISOString()} in time`);
      return msg.seq;
    } finally {
      await this.remove(info.name);
    }
  }

  /** The project's messages with sequences in [from, to], in order. */
  async *read(teamId: number, from: number, to: number, signal: AbortSignal): AsyncGenerator<ProcessedMessage> {
    if (from > to) return;
    const info = await this.ephemeral(teamId, { seq: from });
    try {
      if (info.num_pending === 0) return;
      const consumer = await this.js.consumers.get(this.stream, info.name);
      const messages = await consumer.consume({ max_bytes: this.pullBytes, expires: 5_000 });
      let silent = false;
      let watchdog: NodeJS.Timeout | undefined;
      const arm = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => {
          silent = true;
          void messages.close();
        }, SILENCE_MS);
      };
      const onAbort = () => void messages.close();
      signal.addEventListener('abort', onAbort, { once: true });
      arm();
      let delivered = 0;
      try {
        for await (const msg of messages) {
          arm();
          if (msg.seq > to) break;
          if (msg.info.deliverySequence !== ++delivered) {
            throw new ExportError('internal', `PROCESSED delivery skipped messages after sequence ${msg.seq} (consumer sequence ${msg.info.deliverySequence}, expected ${delivered})`);
          }
          yield parse(msg);
          if (msg.seq >= to || msg.info.pending === 0) break;
        }
      } finally {
        clearTimeout(watchdog);
        signal.removeEventListener('abort', onAbort);
        await messages.close().catch(() => undefined);
      }
      signal.throwIfAborted();
      if (silent) throw new ExportError('internal', `PROCESSED sent nothing for ${SILENCE_MS / 1000} s while reading sequences ${from}..${to}`);
    } finally {
      await this.remove(info.name);
    }
  }
}

function parse(msg: JsMsg): ProcessedMessage {
  return { seq: msg.seq, timeUs: Number(msg.timestampNanos / 1000n), data: msg.data };
}
