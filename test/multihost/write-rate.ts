// How fast the rig's 3-node cluster stores captured events into EVENTS at R3 as one stream and as
// K partition streams (STREAM_PARTITIONS), run inside the rig (host `client`) before Spate starts,
// while the capture streams' names are free: `node --import tsx write-rate.ts '<options JSON>'`
// prints one JSON line per round. A stream's writes all go through its leader; K partitions with
// their leaders on K nodes spread that work. Each round creates EVENTS as Spate does
// (lib's streamConfig for the layout), spreads the leaders over the nodes, publishes what ingest
// nodes publish (messages of captured-event lines on events.<project>.<shard>, Nats-Msg-Id set,
// one connection to each node, the same number in flight whatever K), counts PubAcks and the
// nodes' CPU, then deletes the streams.
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { HEADER_EVENT_COUNT, streamConfig, streamLayout, streamNamesOf, uuidv7 } from '../../lib/index.js';
import { benchEvent } from '../../bench/lib/payloads.js';
import { cpuSeconds } from './cpu.js';

export interface WriteRateOptions {
  servers: string[];
  user: string;
  pass: string;
  /** K of each round, in order (alternate them: the machine's speed drifts). */
  rounds: number[];
  warmupMs: number;
  measureMs: number;
  /** Messages awaiting their PubAck at once, over all streams. */
  inFlight: number;
  eventsPerMessage: number;
  /** The NATS nodes' pids (this process sees the machine's pids), for CPU per message. */
  natsPids: number[];
}

export interface WriteRateRound {
  k: number;
  leaders: string[];
  messagesPerSec: number;
  eventsPerSec: number;
  mbPerSec: number;
  /** NATS CPU (all three nodes) per event, µs. */
  natsCpuUsPerEvent: number;
  /** Each node's part of that CPU (in the order of natsPids). */
  natsCpuShares: number[];
  errors: number;
}

async function spreadLeaders(nc: NatsConnection, jsm: JetStreamManager, names: string[]): Promise<string[]> {
  for (let attempt = 0; attempt < 40; attempt++) {
    const leaders = await Promise.all(names.map(async (n) => (await jsm.streams.info(n)).cluster?.leader ?? '?'));
    const seen = new Set<string>();
    const clash = names.find((_, i) => (seen.has(leaders[i]!) ? true : (seen.add(leaders[i]!), false)));
    if (!clash) return leaders;
    // A step-down elects another replica at random; repeat until every leader differs.
    await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${clash}`, '', { timeout: 5_000 }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(`could not put the leaders of ${names.join(', ')} on distinct nodes`);
}

const SHARDS = 16;

async function round(o: WriteRateOptions, k: number): Promise<WriteRateRound> {
  const nc = await connect({ servers: o.servers, user: o.user, pass: o.pass, name: `write-rate-k${k}` });
  const jsm = await jetstreamManager(nc);
  // Publishers connect to every node, as ingest nodes do (each to one of them): no node carries
  // all the client traffic.
  const publishers = await Promise.all(o.servers.map((server, i) => connect({ servers: [server], user: o.user, pass: o.pass, name: `write-rate-k${k}-${i}` })));
  const js = publishers.map((p) => jetstream(p));
  const layout = streamLayout(SHARDS, k);
  const names = streamNamesOf('events', layout);
  try {
    // Unlimited bytes, as Spate's default: a limit would be reserved on nats3's small store.
    const limits = { replicas: 3, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 };
    for (let p = 0; p < names.length; p++) await jsm.streams.add(streamConfig('events', limits, layout, p));
    const leaders = k > 1 ? await spreadLeaders(nc, jsm, names) : [(await jsm.streams.info(names[0]!)).cluster?.leader ?? '?'];
    // One message per shard, packed like ingest's captured lines, on the subjects ingest uses.
    const messages = Array.from({ length: SHARDS }, (_, shard) => {
      const lines = Array.from({ length: o.eventsPerMessage }, (_, j) => JSON.stringify({ uuid: uuidv7(), ...benchEvent(shard * 1000 + j), now: new Date().toISOString(), token: 'phc_rig', project_id: 1 }));
      return { subject: `events.1.${shard}`, data: Buffer.from(lines.join('\n') + '\n') };
    });
    let acks = 0;
    let bytes = 0;
    let errors = 0;
    let counting = false;
    let next = 0;
    const stopAt = Date.now() + o.warmupMs + o.measureMs;
    const pump = async (slot: number) => {
      while (Date.now() < stopAt) {
        const m = messages[(slot + next++) % messages.length]!;
        const h = natsHeaders();
        h.set(HEADER_EVENT_COUNT, String(o.eventsPerMessage));
        try {
          await js[slot % js.length]!.publish(m.subject, m.data, { msgID: uuidv7(), headers: h });
          if (counting) {
            acks++;
            bytes += m.data.length;
          }
        } catch {
          errors++;
        }
      }
    };
    const pumps = Array.from({ length: o.inFlight }, (_, slot) => pump(slot));
    await new Promise((r) => setTimeout(r, o.warmupMs));
    const cpuBefore = o.natsPids.map((p) => cpuSeconds(p));
    const started = performance.now();
    counting = true;
    await new Promise((r) => setTimeout(r, o.measureMs));
    counting = false;
    const seconds = (performance.now() - started) / 1000;
    const cpuUsed = o.natsPids.map((p, i) => cpuSeconds(p) - cpuBefore[i]!);
    const natsCpu = cpuUsed.reduce((a, b) => a + b, 0);
    await Promise.all(pumps);
    const events = acks * o.eventsPerMessage;
    return {
      k,
      leaders,
      messagesPerSec: acks / seconds,
      eventsPerSec: events / seconds,
      mbPerSec: bytes / seconds / 1e6,
      natsCpuUsPerEvent: events > 0 ? (natsCpu * 1e6) / events : 0,
      natsCpuShares: cpuUsed.map((c) => (natsCpu > 0 ? c / natsCpu : 0)),
      errors,
    };
  } finally {
    for (const name of names) await jsm.streams.delete(name).catch(() => undefined);
    await Promise.all([nc, ...publishers].map((c) => c.close()));
  }
}

const options = JSON.parse(process.argv[2] ?? '{}') as WriteRateOptions;
for (const k of options.rounds) process.stdout.write(`${JSON.stringify(await round(options, k))}\n`);
