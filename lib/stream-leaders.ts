// Spreads the leaders of the partitioned streams over the NATS nodes. JetStream picks each
// stream's leader at random among its peers and never moves it back: three partitions of EVENTS
// often start with two leaders on one node (and after a node restarts, it leads nothing), which
// halves what partitioning is for. The lever is $JS.API.STREAM.LEADER.STEPDOWN.<stream> without a
// preferred peer (built on 2.9, which took none; the new leader is another current peer, at random), so a stream on
// a node that leads more than its share is stepped down, and the leaders read again, until each
// kind's partitions are spread (each node leads ⌊K/N⌋ or ⌈K/N⌉ of them) or a few rounds passed.
// A step-down pauses that stream's writes for ~0.3 s (publishers retry), so it happens only
// while every peer is current, and not at all on single-node or single-stream clusters.
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';
import { PARTITIONED_KINDS, streamNamesOf, type StreamLayout } from './streams.js';

export interface StreamLeader {
  name: string;
  /** The node that leads it; undefined while it has none (an election). */
  leader: string | undefined;
  /** The other nodes that hold a replica. */
  peers: string[];
  /** Every replica is current and online: a step-down would not wait for one to catch up. */
  settled: boolean;
}

/**
 * The streams to step down so each group's (one kind's partitions) leaders spread over their
 * peers: a node leading more than ⌈K/N⌉ sheds the excess; when none does but a node leads fewer
 * than ⌊K/N⌋, one stream of the busiest node moves. A group with a stream unsettled is left alone.
 */
export function leadersToMove(groups: readonly (readonly StreamLeader[])[]): string[] {
  const moves: string[] = [];
  for (const group of groups) {
    if (group.length < 2 || group.some((s) => s.leader === undefined || !s.settled)) continue;
    const nodes = [...new Set(group.flatMap((s) => [...s.peers, s.leader!]))].sort();
    const led = new Map(nodes.map((n) => [n, [] as string[]]));
    for (const s of group) led.get(s.leader!)!.push(s.name);
    const most = Math.ceil(group.length / nodes.length);
    const least = Math.floor(group.length / nodes.length);
    const over = [...led.values()].filter((names) => names.length > most).flatMap((names) => names.slice(most));
    if (over.length > 0) moves.push(...over);
    else if ([...led.values()].some((names) => names.length < least)) {
      const busiest = [...led.values()].reduce((a, b) => (b.length > a.length ? b : a));
      if (busiest.length > least) moves.push(busiest[busiest.length - 1]!);
    }
  }
  return moves;
}

export interface SpreadResult {
  /** Step-downs made. */
  moved: number;
  /** Every group spread (or nothing to spread); false when the rounds ran out or a group was unsettled. */
  spread: boolean;
  /** The leader of each stream at the end. */
  leaders: Record<string, string | undefined>;
}

/** Step-down rounds: each move lands on a right node with at least even odds, so 12 rounds leave a group crowded about once in 4,000 starts. */
const ROUNDS = 12;
/** How long the first spread waits for just-created (or catching-up) replicas to be current. */
const SETTLE_WAIT_MS = 10_000;
/** How long a stepped-down stream may take to have a leader again before the round goes on. */
const ELECTION_WAIT_MS = 10_000;

async function leaderOf(jsm: JetStreamManager, name: string): Promise<StreamLeader> {
  const { cluster } = await jsm.streams.info(name);
  const replicas = cluster?.replicas ?? [];
  return {
    name,
    leader: cluster?.leader || undefined,
    peers: replicas.map((r) => r.name),
    settled: replicas.every((r) => r.current && !r.offline),
  };
}

/** The stream's leader steps down; true when the server says it did. */
async function stepDown(nc: NatsConnection, name: string): Promise<boolean> {
  const reply = await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${name}`, '', { timeout: 5_000 });
  return (reply.json<{ success?: boolean }>().success ?? false) === true;
}

async function waitForLeader(jsm: JetStreamManager, name: string, stop: AbortSignal | undefined): Promise<void> {
  const deadline = Date.now() + ELECTION_WAIT_MS;
  while (Date.now() < deadline && !stop?.aborted) {
    const leader = await leaderOf(jsm, name).then(
      (s) => s.leader,
      () => undefined, // a stream between leaders may not answer its info in time
    );
    if (leader) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Steps leaders down until each partitioned kind's streams are led from different nodes (see
 * above), first waiting up to `settleMs` for replicas that are not current yet. Ends after the
 * round in progress when `stop` aborts.
 */
export async function spreadStreamLeaders(
  nc: NatsConnection,
  jsm: JetStreamManager,
  layout: StreamLayout,
  log: Logger,
  { settleMs = 0, stop }: { settleMs?: number; stop?: AbortSignal } = {},
): Promise<SpreadResult> {
  const names = PARTITIONED_KINDS.map((kind) => streamNamesOf(kind, layout));
  let moved = 0;
  const settleBy = Date.now() + settleMs;
  for (let rounds = 0; ; ) {
    // A stream whose leader is gone answers its info only after the request times out: a stop
    // does not wait for that.
    const groups = await unlessStopped(Promise.all(names.map((group) => Promise.all(group.map((name) => leaderOf(jsm, name))))), stop);
    if (groups === undefined) return { moved, spread: false, leaders: {} };
    const leaders = Object.fromEntries(groups.flat().map((s) => [s.name, s.leader]));
    const moves = leadersToMove(groups);
    const unsettled = groups.some((g) => g.length > 1 && g.some((s) => !s.leader || !s.settled));
    // Streams created a moment ago have replicas still catching up, and a group with one is left
    // alone: wait for them (briefly) rather than start capture with the leaders where they fell.
    if (moves.length === 0 && unsettled && Date.now() < settleBy && !stop?.aborted) {
      await new Promise((r) => setTimeout(r, 250));
      continue;
    }
    if (moves.length === 0 || rounds++ === ROUNDS || stop?.aborted) {
      if (moved > 0) log.info({ moved, leaders }, 'stream leaders spread over the NATS nodes');
      return { moved, spread: moves.length === 0 && !unsettled, leaders };
    }
    const done = await Promise.all(
      moves.map((name) =>
        stepDown(nc, name).catch((err: unknown) => {
          log.warn({ stream: name, err: err instanceof Error ? err.message : String(err) }, 'stream leader step-down failed');
          return false;
        }),
      ),
    );
    moved += done.filter(Boolean).length;
    await unlessStopped(Promise.all(moves.map((name) => waitForLeader(jsm, name, stop))), stop);
  }
}

/** `work`'s result, or undefined as soon as `stop` aborts (work's own failure then goes unheard). */
function unlessStopped<T>(work: Promise<T>, stop: AbortSignal | undefined): Promise<T | undefined> {
  if (!stop) return work;
  if (stop.aborted) {
    work.catch(() => undefined);
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const onStop = () => {
      work.catch(() => undefined);
      resolve(undefined);
    };
    stop.addEventListener('abort', onStop, { once: true });
    work.then(resolve, reject).finally(() => stop.removeEventListener('abort', onStop));
  });
}

/**
 * Spreads the leaders at start, then every `intervalMs` (±25 %, so ingest nodes do not all look at
 * once) while the process runs: a NATS node back from a restart leads nothing until then.
 * Does nothing when the layout has single streams or intervalMs is 0.
 */
export class StreamLeaderSpreader {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly layout: StreamLayout,
    private readonly intervalMs: number,
    private readonly log: Logger,
  ) {}

  /** The first spread (awaited: capture starts with the leaders spread), then the periodic ones. */
  async start(): Promise<SpreadResult | undefined> {
    if (this.layout.partitions < 2 || this.intervalMs <= 0) return undefined;
    const first = await this.spread(SETTLE_WAIT_MS);
    this.schedule();
    return first;
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(): void {
    if (this.stopping.signal.aborted) return;
    this.timer = setTimeout(() => {
      this.running = this.spread().finally(() => this.schedule());
    }, this.intervalMs * (0.75 + Math.random() / 2));
    this.timer.unref();
  }

  private spread(settleMs = 0): Promise<SpreadResult | undefined> {
    return spreadStreamLeaders(this.nc, this.jsm, this.layout, this.log, { settleMs, stop: this.stopping.signal }).catch((err: unknown) => {
      this.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'could not spread the stream leaders: trying again later');
      return undefined;
    });
  }
}
