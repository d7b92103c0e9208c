// An ordered consumer can go silent for good (message-feed.ts): messages the server sent just
// before it cut the connection are never sent again, and a message bigger than a pull asks for is
// never delivered. A feed quiet for STALL_PROBE_MS is checked against the stream itself.
import type { JetStreamManager, MsgRequest } from '@nats-io/jetstream';
import type { Logger } from '../../lib/index.js';
import { errorText } from '../coordination/index.js';
import type { MessageFeed } from './message-feed.js';

/** A message is in the stream that the shard's consumer never delivered: open a new one. */
export class FeedStalledError extends Error {
  override name = 'FeedStalledError';
}

/** How long a feed may stay quiet before the stream is asked whether it holds more for the shard. */
const STALL_PROBE_MS = 5_000;
/** Largest message expected at first (ingest's and the workers' default message size). */
const EXPECTED_MESSAGE_BYTES = 1024 * 1024;

export class StallProbe {
  /** Room each pull keeps for one message; grows when a bigger one is found stuck. */
  messageMaxBytes = EXPECTED_MESSAGE_BYTES;
  private lastProbeAt = 0;

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly filterSubject: string,
    private readonly maxPayload: () => number,
    private readonly log: Logger,
  ) {}

  /**
   * After STALL_PROBE_MS without a message, asks the stream for the shard's next message after the
   * last one received; if there is one, the consumer lost it (or cannot deliver it) and must be
   * replaced (FeedStalledError). Idle shards cost one lookup per STALL_PROBE_MS.
   */
  async check(feed: MessageFeed): Promise<void> {
    const now = performance.now();
    if (now - feed.lastReceivedAt < STALL_PROBE_MS || now - this.lastProbeAt < STALL_PROBE_MS) return;
    this.lastProbeAt = now;
    let next: Awaited<ReturnType<JetStreamManager['streams']['getMessage']>>;
    try {
      // The server's MSG.GET takes next_by_subj (a wildcard too) since 2.9; nats.js types it only for direct gets.
      const query = { seq: feed.lastSeq + 1, next_by_subj: this.filterSubject } as unknown as MsgRequest;
      next = await this.jsm.streams.getMessage(this.stream, query);
    } catch (err) {
      // NATS unreachable: the consumer is waiting it out too; probe again later.
      this.log.debug({ err: errorText(err) }, 'stall probe failed');
      return;
    }
    // A message stored moments ago may simply not have been delivered yet (a pull being renewed):
    // only one that has waited as long as the feed has been quiet counts as lost.
    if (!next || performance.now() - feed.lastReceivedAt < STALL_PROBE_MS || Date.now() - next.time.getTime() < STALL_PROBE_MS) return;
    // Room in every pull for this message, headers and all.
    this.messageMaxBytes = Math.min(Math.max(this.messageMaxBytes, next.data.length + 16 * 1024), this.maxPayload());
    throw new FeedStalledError(`message ${next.seq} (${next.data.length} bytes) is in the stream but never arrived`);
  }
}
