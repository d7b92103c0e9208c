// Ceiling: raw batched JetStream publishing of the bytes Spate would publish — the same NDJSON
// lines packed into messages of the same size, several messages in flight, no HTTP, no parsing.
import { jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { connectNats, HEADER_EVENT_COUNT, shardOf, subjectFor, uuidv7, type NatsAuth } from '../../lib/index.js';
import { benchEvent } from '../lib/payloads.js';

export interface PublishCeiling {
  eventsPerSec: number;
  mbPerSec: number;
  messagesPerSec: number;
  /** Events published in all. */
  events: number;
  /** CPU seconds this process spent publishing (not building the messages). */
  clientCpuSeconds: number;
}

export async function measureJetStreamPublish(natsUrl: string, auth: NatsAuth, o: { durationS: number; messageBytes: number; inFlight: number }): Promise<PublishCeiling> {
  const nc = await connectNats(natsUrl, 'bench-ceiling', auth);
  const js = jetstream(nc);
  // Pre-build one message per shard, packed like Spate's captured lines.
  const now = new Date().toISOString();
  const messages: { subject: string; data: Uint8Array; count: number }[] = [];
  for (let shard = 0; shard < 16; shard++) {
    let text = '';
    let size = 0;
    let count = 0;
    for (let i = 0; size < o.messageBytes - 600; i++) {
      const e = benchEvent(i);
      if (shardOf(e.distinct_id, 16) !== shard) continue;
      const line = JSON.stringify({ uuid: uuidv7(), ...e, now, ip: '127.0.0.1', token: 'phc_bench', project_id: 1 }) + '\n';
      text += line;
      size += Buffer.byteLength(line);
      count++;
    }
    messages.push({ subject: subjectFor('events', 1, shard), data: Buffer.from(text), count });
  }
  let events = 0;
  let bytes = 0;
  let sent = 0;
  const deadline = Date.now() + o.durationS * 1000;
  const started = performance.now();
  const cpuAtStart = process.cpuUsage();
  const worker = async () => {
    while (Date.now() < deadline) {
      const m = messages[sent++ % messages.length]!;
      const h = natsHeaders();
      h.set(HEADER_EVENT_COUNT, String(m.count));
      await js.publish(m.subject, m.data, { msgID: `ceiling-${sent}-${Math.random()}`, headers: h });
      events += m.count;
      bytes += m.data.length;
    }
  };
  await Promise.all(Array.from({ length: o.inFlight }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuAtStart);
  await nc.close();
  return { eventsPerSec: events / seconds, mbPerSec: bytes / seconds / 1e6, messagesPerSec: sent / seconds, events, clientCpuSeconds: (cpu.user + cpu.system) / 1e6 };
}
