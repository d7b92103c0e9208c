// Reads a project's PROCESSED messages as they are stored and reports, per event, when it was
// sent (its `$bench_sent_ms`, mix-bodies.ts) and when it came out. The send times are found in
// the bytes (no JSON.parse of the lines): the reader shares the cores with the pipeline it measures.
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { STREAMS, type NatsConnection } from '../../lib/index.js';
import { SENT_PROPERTY } from './mix-bodies.js';

const MARKER = Buffer.from(`"${SENT_PROPERTY}":`);

/** Calls `sent` for each `"$bench_sent_ms":<digits>` in `data`, in order. */
export function scanSentTimes(data: Uint8Array, sent: (ms: number) => void): void {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  for (let at = buf.indexOf(MARKER); at !== -1; at = buf.indexOf(MARKER, at)) {
    at += MARKER.length;
    let ms = 0;
    let digits = 0;
    for (let c = buf[at]; c !== undefined && c >= 0x30 && c <= 0x39; c = buf[++at]) {
      ms = ms * 10 + (c - 0x30);
      digits++;
    }
    if (digits > 0) sent(ms);
  }
}

export interface ProcessedReader {
  /** Events read so far. */
  readonly count: number;
  /** When the last event was read (Date.now()), 0 before any. */
  readonly lastAt: number;
  stop(): Promise<void>;
}

/** From now on, `onEvent(sentMs, arrivedMs)` for every event stored in processed.<projectId>.*. */
export async function readProcessed(nc: NatsConnection, projectId: number, onEvent: (sentMs: number, arrivedMs: number) => void): Promise<ProcessedReader> {
  const consumer = await jetstream(nc).consumers.get(STREAMS.processed, { filter_subjects: `processed.${projectId}.>`, deliver_policy: DeliverPolicy.New });
  // Counted in messages, not bytes: a pull whose bytes leave no room for the next message ends with
  // a 409, and nats.js pulls again only after missing two heartbeats (tens of seconds).
  const messages = await consumer.consume({ max_messages: 64 });
  const state = { count: 0, lastAt: 0 };
  const reading = (async () => {
    for await (const m of messages) {
      const now = Date.now();
      scanSentTimes(m.data, (sent) => {
        state.count++;
        onEvent(sent, now);
      });
      state.lastAt = now;
    }
  })();
  return {
    get count() {
      return state.count;
    },
    get lastAt() {
      return state.lastAt;
    },
    async stop() {
      await messages.close();
      await reading.catch(() => undefined);
    },
  };
}
