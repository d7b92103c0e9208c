// How much the event streams hold: JetStream's own count of messages and bytes (stream info),
// which the admin user may read but not the messages themselves (deploy/nats/auth.conf). Which
// streams there are (STREAM_PARTITIONS) the admin server learns from the cluster settings the
// first ingest node or worker recorded, not from a setting of its own.
import type { JetStreamManager } from '@nats-io/jetstream';
import { allStreamNames, DEFAULT_STREAM_LAYOUT, readClusterSettings, recordedStreamLayout, type NatsConnection, type StreamLayout } from '../../lib/index.js';

export interface StreamSize {
  name: string;
  /** undefined: the stream does not exist yet, or NATS did not answer. */
  messages: number | undefined;
  bytes: number | undefined;
}

export class StreamSizes {
  /** Fixed for the cluster's life once recorded; until then, the single streams. */
  private layout: StreamLayout | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
  ) {}

  async read(): Promise<StreamSize[]> {
    this.layout ??= await readClusterSettings(this.nc).then(
      (settings) => (settings ? recordedStreamLayout(settings) : undefined),
      () => undefined,
    );
    return Promise.all(
      allStreamNames(this.layout ?? DEFAULT_STREAM_LAYOUT).map(async (name) => {
        try {
          const { state } = await this.jsm.streams.info(name);
          return { name, messages: state.messages, bytes: state.bytes };
        } catch {
          return { name, messages: undefined, bytes: undefined };
        }
      }),
    );
  }
}
