// Reads the PROCESSED stream and counts how often each event uuid appears in it.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connectNats, parseNdjson, STREAMS, type ClusterFile, type NatsConnection, type ProcessedEvent } from '../../lib/index.js';

export class ProcessedCounter {
  readonly counts = new Map<string, number>();
  /** Sequence numbers of PROCESSED that could not be read for a minute (should stay empty). */
  readonly gaps: number[] = [];
  private nextSeq = 1;
  private missingSince: { seq: number; at: number } | undefined;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
  ) {}

  /** Connects as the operator user of a running cluster's cluster.json. */
  static async open(cluster: Pick<ClusterFile, 'natsUrl' | 'natsUser' | 'natsPassword'>): Promise<ProcessedCounter> {
    return ProcessedCounter.over(await connectNats(cluster.natsUrl, 'fault-test-reader', { user: cluster.natsUser, pass: cluster.natsPassword }));
  }

  /** Reads through a connection of the caller's (closed by close()). */
  static async over(nc: NatsConnection): Promise<ProcessedCounter> {
    return new ProcessedCounter(nc, await jetstreamManager(nc));
  }

  /**
   * Reads every message stored since the last call. A message the stream says it holds but does
   * not return (a get answered by a replica that lags behind, or a deposed leader during a
   * partition) is asked for again at the next call rather than passed over: passing it over would
   * count its events as lost. One unreadable for a minute is recorded in `gaps` and passed.
   */
  async refresh(): Promise<void> {
    const info = await this.jsm.streams.info(STREAMS.processed);
    for (let seq = Math.max(this.nextSeq, info.state.first_seq); seq <= info.state.last_seq; seq++) {
      const m = await this.jsm.streams.getMessage(STREAMS.processed, { seq });
      if (m) {
        for (const e of parseNdjson<ProcessedEvent>(m.data)) this.counts.set(e.uuid, (this.counts.get(e.uuid) ?? 0) + 1);
      } else {
        this.missingSince ??= { seq, at: Date.now() };
        if (this.missingSince.seq !== seq) this.missingSince = { seq, at: Date.now() };
        if (Date.now() - this.missingSince.at < 60_000) return;
        this.gaps.push(seq);
      }
      this.missingSince = undefined;
      this.nextSeq = seq + 1;
    }
  }

  close(): Promise<void> {
    return this.nc.close();
  }
}
