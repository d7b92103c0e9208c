// How fast the rig's 3-node cluster stores writes into K streams at R3, run inside the rig (host
// `client`): `node --import tsx write-rate.ts '<options JSON>'` prints one JSON line per round.
// A stream's writes all go through its leader, so one stream is bounded by one node; K streams
// with their leaders on K nodes spread that work. Each round creates K test streams (R3), moves
// their leaders onto distinct nodes, publishes captured-event-sized messages (Nats-Msg-Id set, as
// ingest does) with the same number in flight whatever K, counts PubAcks, then deletes them.
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { HEADER_EVENT_COUNT, uuidv7 } from '../../lib/index.js';
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

async function round(o: WriteRateOptions, k: number, n: number): Promise<WriteRateRound> {
  const nc = await connect({ servers: o.servers, user: o.user, pass: o.pass, name: `write-rate-k${k}` });
  const jsm = await jetstreamManager(nc);
  // Publishers connect to every node, as ingest nodes do (each to one of them): no node carries
  // all the client traffic.
  const publishers = await Promise.all(o.servers.map((server, i) => connect({ servers: [server], user: o.user, pass: o.pass, name: `write-rate-k${k}-${i}` })));
  const js = publishers.map((p) => jetstream(p));
  const names = Array.from({ length: k }, (_, i) => `MH_WRITE_${n}_K${k}_${i}`);
  try {
    for (const [i, name] of names.entries()) {
      // max_bytes bounds what a round leaves on nats3's small store; old messages are discarded.
      await jsm.streams.add({ name, subjects: [`mhwrite.${n}.${i}.>`], num_replicas: 3, max_bytes: 64 * 1024 * 1024, duplicate_window: 120_000_000_000 });
    }
    const leaders = k > 1 ? await spreadLeaders(nc, jsm, names) : [(await jsm.streams.info(names[0]!)).cluster?.leader ?? '?'];
    // One message per subject, 16 subjects per stream, packed like ingest's captured lines.
    const messages = names.flatMap((_, i) =>
      Array.from({ length: 16 }, (_, shard) => {
        const lines = Array.from({ length: o.eventsPerMessage }, (_, j) => JSON.stringify({ uuid: uuidv7(), ...benchEvent(shard * 1000 + j), now: new Date().toISOString(), token: 'phc_rig', project_id: 1 }));
        return { subject: `mhwrite.${n}.${i}.${shard}`, data: Buffer.from(lines.join('\n') + '\n') };
      }),
    );
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
for (const [n, k] of options.rounds.entries()) process.stdout.write(`${JSON.stringify(await round(options, k, n))}\n`);
