// How much the event streams hold: JetStream's own count of messages and bytes (stream info),
// which the admin user may read but not the messages themselves (deploy/nats/auth.conf).
import type { JetStreamManager } from '@nats-io/jetstream';
import { STREAMS } from '../../lib/index.js';

export interface StreamSize {
  name: string;
  /** undefined: the stream does not exist yet, or NATS did not answer. */
  messages: number | undefined;
  bytes: number | undefined;
}

export async function streamSizes(jsm: JetStreamManager): Promise<StreamSize[]> {
  return Promise.all(
    Object.values(STREAMS).map(async (name) => {
      try {
        const { state } = await jsm.streams.info(name);
        return { name, messages: state.messages, bytes: state.bytes };
      } catch {
        return { name, messages: undefined, bytes: undefined };
      }
    }),
  );
}
