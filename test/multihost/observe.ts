// What the rig's test looks at besides the scenario tally: PostgreSQL through the gateway, where
// missing events are, how a NATS node's monitoring answers during a fault, restarts by whom.
import { setTimeout as sleep } from 'node:timers/promises';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { STREAMS, streamNamesOf, type StreamLayout } from '../../lib/index.js';
import type { ProcessedCounter } from '../faults/processed.js';
import { seconds } from '../faults/scenario.js';
import type { Rig } from './rig.js';
import { ADDRESS, PORT, type NatsHost } from './topology.js';

export async function pgQuery<T extends pg.QueryResultRow>(rig: Rig, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: await rig.gateway.url('postgres', ADDRESS.db, PORT.postgres, '/spate') });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

/** Rows written and WAL bytes of the spate database so far. */
export async function pgWrites(rig: Rig): Promise<{ rows: number; wal: number }> {
  const [r] = await pgQuery<{ rows: string; wal: string }>(
    rig,
    `select (select sum(tup_inserted + tup_updated + tup_deleted) from pg_stat_database where datname = 'spate') as rows, pg_current_wal_lsn() - '0/0' as wal`,
  );
  return { rows: Number(r!.rows), wal: Number(r!.wal) };
}

/** Bytes stored in streams (summed over a kind's partitions). */
export async function streamBytes(jsm: JetStreamManager, names: string[]): Promise<number> {
  const infos = await Promise.all(names.map((n) => jsm.streams.info(n)));
  return infos.reduce((sum, i) => sum + i.state.bytes, 0);
}

/** Restarts since `before`, by service ("nats3 ×1; by the liveness probe: nats3"), or "none". */
export function restartsSince(rig: Rig, before: Record<string, number>, livenessBefore: number): string {
  const parts = Object.entries(rig.restarts())
    .filter(([name, n]) => n > (before[name] ?? 0))
    .map(([name, n]) => `${name} ×${n - (before[name] ?? 0)}`);
  const liveness = rig.livenessRestarts.slice(livenessBefore).map((r) => r.host);
  if (liveness.length > 0) parts.push(`by the liveness probe: ${liveness.join(', ')}`);
  return parts.length === 0 ? 'none' : parts.join('; ');
}

/**
 * Where acknowledged events missing from PROCESSED are: which stream holds them (scanning the
 * capture streams and PROCESSED again from the start, through their leaders), whether the workers
 * recorded them as seen (event_dedup) and where each shard's committed position is.
 */
export async function explainMissing(rig: Rig, jsm: JetStreamManager, processed: ProcessedCounter, layout: StreamLayout, uuids: string[]): Promise<string> {
  const lines: string[] = [];
  const wanted = new Set(uuids);
  const deadline = Date.now() + 90_000;
  for (const stream of [...streamNamesOf('events', layout), ...streamNamesOf('overflow', layout), STREAMS.processed]) {
    const { state } = await jsm.streams.info(stream);
    const found = new Map<string, string>();
    let unreadable = 0;
    for (let seq = state.first_seq; seq <= state.last_seq && Date.now() < deadline; seq++) {
      const m = await jsm.streams.getMessage(stream, { seq }).catch(() => null);
      if (!m) {
        unreadable++;
        continue;
      }
      for (const line of new TextDecoder().decode(m.data).split('\n')) {
        const uuid = /"uuid":"([^"]+)"/.exec(line)?.[1];
        if (uuid && wanted.has(uuid)) found.set(uuid, `${m.subject} seq ${seq}`);
      }
    }
    if (found.size > 0 || stream === STREAMS.processed) {
      lines.push(`${stream} (seq ${state.first_seq}-${state.last_seq}, ${unreadable} unreadable): ${uuids.map((u) => `${u} ${found.get(u) ?? 'absent'}`).join('; ')}`);
    }
  }
  const dedup = await pgQuery<{ uuid: string }>(rig, `select uuid::text from event_dedup where uuid in (${uuids.map((u) => `'${u}'`).join(',')})`);
  lines.push(`event_dedup holds ${dedup.length} of them: ${dedup.map((r) => r.uuid).join(', ')}`);
  const positions = await pgQuery<{ stream: string; shard: number; position: string; pending_end: string | null }>(
    rig,
    'select stream, shard, position::text, pending_end::text from shard_positions order by stream, shard',
  );
  lines.push(`positions: ${positions.map((p) => `${p.stream}/${p.shard}@${p.position}${p.pending_end ? `(pending ${p.pending_end})` : ''}`).join(' ')}`);
  lines.push(`PROCESSED gaps the counter passed: ${JSON.stringify(processed.gaps)}`);
  return lines.join('\n');
}

/**
 * Makes `host` lead at least one stream `wanted` picks (a step-down elects another replica at
 * random, so streams led elsewhere are stepped down until one lands on it). Returns every stream
 * and bucket it leads then.
 */
export async function leadOneOf(nc: NatsConnection, jsm: JetStreamManager, host: NatsHost, wanted: (stream: string) => boolean): Promise<string[]> {
  const server = `spate-${host}`;
  for (let round = 0; round < 30; round++) {
    const led: string[] = [];
    const elsewhere: string[] = [];
    for await (const info of jsm.streams.list()) {
      if (info.cluster?.leader === server) led.push(info.config.name);
      else if (wanted(info.config.name)) elsewhere.push(info.config.name);
    }
    if (led.some(wanted)) return led.sort();
    if (elsewhere.length === 0) throw new Error(`no stream wanted for ${host} to lead`);
    const name = elsewhere[round % elsewhere.length]!;
    await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${name}`, '', { timeout: 5_000 }).catch(() => undefined);
    await sleep(1_000);
  }
  throw new Error(`${host} leads none of the streams wanted after 30 step-downs`);
}

export const MONITOR_PATHS = ['/healthz', '/healthz?js-enabled-only=true', '/healthz?js-server-only=true', '/jsz'] as const;

/** A node's monitoring answers every 2 s until the returned function is called: runs of the same answers. */
export function traceNats(rig: Rig, host: NatsHost): () => string {
  const started = Date.now();
  const samples: { at: number; codes: string }[] = [];
  let stopped = false;
  void (async () => {
    while (!stopped) {
      const codes = (await rig.probeNats(host, MONITOR_PATHS)).join(' ');
      samples.push({ at: Date.now() - started, codes });
      await sleep(2_000);
    }
  })();
  return () => {
    stopped = true;
    const runs = samples.filter((s, i) => i === 0 || samples[i - 1]!.codes !== s.codes).map((s) => `  from ${seconds(s.at)}: ${s.codes}`);
    return [`${host}'s ${MONITOR_PATHS.join(', ')} (HTTP status from its own host, - = no answer in 2 s; from the fault):`, ...runs].join('\n');
  };
}
