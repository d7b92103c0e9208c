// `npx tsx bench/plugins/delivery.ts [--events N]` (and the `plugin delivery` stage of `npm run
// bench`): how fast a destination plugin delivers processed events to a local HTTP server, side
// by side with a ceiling measured in the same run: the same requests sent straight to the same
// server with the worker's HTTP client and settings.
//
// Processes, each apart (as in production): nats-server and PostgreSQL; one worker (dist/workers)
// holding the destination config, its PROCESSED already filled with N events of one project; the
// destination (delivery-sink.ts, uWS), which times the deliveries; the ceiling (webhook-ceiling.ts).
// A rate is taken at the destination, between the arrival of 10 % and of 90 % of the events.
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { headers } from '@nats-io/transport-node';
import {
  compilePluginSource,
  generateSecretKey,
  NATS_USERS,
  PLUGIN_CONFIGS_BUCKET,
  PLUGIN_SOURCES_BUCKET,
  subjectFor,
  type NatsConnection,
  type PluginConfigsRecord,
} from '../../lib/index.js';
import { freePort } from '../../deploy/local/ports.js';
import { waitFor } from '../../deploy/local/wait.js';
import { parseBenchArgs, usageError } from '../lib/cli.js';
import { startPipelineServers } from '../lib/pipeline-servers.js';
import { cpuSeconds, startNodeProcess, type BenchProcess } from '../lib/processes.js';
import type { Table } from '../lib/report.js';
import { DELIVERY_CASES, processedEvent, TEAM } from './delivery-cases.js';

export interface DeliverySettings {
  connections: number;
  pipelining: number;
  inFlight: number;
  batch: number;
}

/** The worker's defaults (workers/config.ts). */
export const DEFAULT_DELIVERY_SETTINGS: DeliverySettings = { connections: 32, pipelining: 1, inFlight: 256, batch: 500 };

export interface DeliveryCaseResult {
  case: string;
  /** Events per second through the worker's destination, and straight to the server. */
  spate: number;
  ceiling: number;
  /** Requests the destination received for the N events (Spate; a retry would add some). */
  requests: number;
  /** CPU µs per event of the worker and of the destination server while Spate delivered. */
  workerCpuUs: number;
  sinkCpuUs: number;
  /** CPU µs per event of the ceiling's client. */
  ceilingCpuUs: number;
}

export interface PluginDeliveryResult {
  name: 'plugin delivery';
  at: string;
  events: number;
  settings: DeliverySettings;
  cases: DeliveryCaseResult[];
}

interface SinkCount {
  requests: number;
  events: number;
  marks: number[];
}

/** Events per second between 10 % and 90 % of `n` arrived. */
function rateOf(count: SinkCount, n: number): number {
  const from = count.marks[9];
  const to = count.marks[89];
  if (from === undefined || to === undefined || to <= from) return 0;
  return Math.round((0.8 * n) / ((to - from) / 1000));
}

async function publishProcessed(nc: NatsConnection, events: number): Promise<void> {
  const js = jetstream(nc);
  const perMessage = 1_000;
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < events; i += perMessage) {
    const lines: string[] = [];
    for (let j = i; j < Math.min(events, i + perMessage); j++) lines.push(JSON.stringify(processedEvent(j)));
    const h = headers();
    h.set('Spate-Events', String(lines.length));
    pending.push(js.publish(subjectFor('processed', TEAM, (i / perMessage) % 16), `${lines.join('\n')}\n`, { msgID: `bench-delivery-${i}`, headers: h }));
    if (pending.length >= 32) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
}

function startPrinter(relative: string, env: NodeJS.ProcessEnv, onLine: (json: Record<string, unknown>) => void): BenchProcess {
  return startNodeProcess(import.meta.url, relative, env, (line) => {
    try {
      onLine(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // Not ours.
    }
  });
}

export async function runPluginDelivery(o: {
  events: number;
  settings?: DeliverySettings;
  /** Indexes into DELIVERY_CASES (default: all). */
  cases?: readonly number[];
  log: (m: string) => void;
  signal?: AbortSignal;
}): Promise<PluginDeliveryResult> {
  const settings = o.settings ?? DEFAULT_DELIVERY_SETTINGS;
  const n = o.events;
  const processes: BenchProcess[] = [];
  const servers = await startPipelineServers('bench-delivery');
  const { nats, auth, databaseUrl, nc } = servers;
  try {
    const configs = await new Kvm(nc).create(PLUGIN_CONFIGS_BUCKET, { history: 1 });
    const sources = await new Kvm(nc).create(PLUGIN_SOURCES_BUCKET, { history: 1 });

    // Configs are dated before the events: each delivers all of them.
    const enabledAt = new Date(Date.now() - 60_000).toISOString();
    o.log(`plugin delivery: publishing ${n.toLocaleString('en-US')} events to PROCESSED…`);
    await publishProcessed(nc, n);

    let sinkPort = 0;
    const sink = startPrinter('./delivery-sink', {}, (j) => (sinkPort = Number(j.port)));
    processes.push(sink);
    await waitFor('the destination server', () => sinkPort > 0 || sink.child.exitCode !== null, 30_000);
    const sinkUrl = `http://127.0.0.1:${sinkPort}`;
    const resetSink = () => fetch(`${sinkUrl}/_reset?expect=${n}`, { method: 'POST' });
    const count = async () => (await (await fetch(`${sinkUrl}/_count`)).json()) as SinkCount;

    const statusPort = await freePort();
    const worker = startNodeProcess(import.meta.url, '../../workers/main', {
      NATS_URL: nats.url,
      NATS_USER: NATS_USERS.worker,
      NATS_PASSWORD: auth.passwords.worker,
      SPATE_SECRET_KEY: generateSecretKey(),
      DATABASE_URL: databaseUrl,
      WORKER_METRICS_PORT: String(statusPort),
      WORKER_ID: 'bench-delivery',
      PLUGIN_EGRESS_ALLOW: 'loopback',
      PLUGIN_WEBHOOK_CONNECTIONS: String(settings.connections),
      PLUGIN_WEBHOOK_PIPELINING: String(settings.pipelining),
      PLUGIN_WEBHOOK_IN_FLIGHT: String(settings.inFlight),
      PLUGIN_DELIVERY_BATCH: String(settings.batch),
      LOG_LEVEL: 'warn',
    });
    processes.push(worker);
    await waitFor('the worker', async () => (await fetch(`http://127.0.0.1:${statusPort}/_ready`).catch(() => undefined))?.ok === true, 60_000);

    const results: DeliveryCaseResult[] = [];
    for (const [index, c] of DELIVERY_CASES.entries()) {
      if (o.cases && !o.cases.includes(index)) continue;
      o.signal?.throwIfAborted();
      const compiled = (await compilePluginSource(new Map([['index.ts', c.source]])))!;
      await sources.put(compiled.hash, compiled.code);
      const id = 100 + index;
      const record: PluginConfigsRecord = {
        team_id: TEAM,
        configs: [
          {
            id,
            plugin_id: id,
            order: 1,
            config: { url: sinkUrl },
            plugin: { name: c.name, plugin_type: 'source', url: null, tag: null, capabilities: { methods: [] }, updated_at: enabledAt, source_hash: compiled.hash },
            updated_at: enabledAt,
          },
        ],
      };
      await resetSink();
      const cpu0 = { worker: cpuSeconds(worker.pid), sink: cpuSeconds(sink.pid) };
      o.log(`plugin delivery: ${c.name}…`);
      await configs.put(String(TEAM), JSON.stringify(record));
      await waitFor(`${c.name}: every event at the destination`, async () => (await count()).events >= n, 600_000, 100, o.signal);
      const delivered = await count();
      const cpu1 = { worker: cpuSeconds(worker.pid), sink: cpuSeconds(sink.pid) };
      // The config goes: its holder stops (it has delivered everything).
      await configs.put(String(TEAM), JSON.stringify({ team_id: TEAM, configs: [] }));

      await resetSink();
      let done = false;
      let ceilingCpu = 0;
      const ceiling = startPrinter('./webhook-ceiling', {
        SINK_URL: sinkUrl,
        CASE: String(index),
        EVENTS: String(n),
        CONNECTIONS: String(settings.connections),
        PIPELINING: String(settings.pipelining),
        IN_FLIGHT: String(settings.inFlight),
      }, (j) => {
        done = j.done !== undefined;
        ceilingCpu = Number(j.cpuSeconds);
      });
      processes.push(ceiling);
      await waitFor(`${c.name}: the ceiling`, () => {
        if (ceiling.child.exitCode !== null && !done) throw new Error('the ceiling exited (it failed)');
        return done;
      }, 600_000, 100, o.signal);
      await ceiling.stop();
      const straight = await count();

      const result: DeliveryCaseResult = {
        case: c.name,
        spate: rateOf(delivered, n),
        ceiling: rateOf(straight, n),
        requests: delivered.requests,
        workerCpuUs: Math.round(((cpu1.worker - cpu0.worker) * 1e6 * 10) / n) / 10,
        sinkCpuUs: Math.round(((cpu1.sink - cpu0.sink) * 1e6 * 10) / n) / 10,
        ceilingCpuUs: Math.round((ceilingCpu * 1e6 * 10) / n) / 10,
      };
      o.log(
        `plugin delivery: ${c.name}: ${result.spate.toLocaleString('en-US')} events/s (ceiling ${result.ceiling.toLocaleString('en-US')}, ${Math.round((100 * result.spate) / Math.max(1, result.ceiling))} %); ` +
          `${result.requests} requests; CPU µs/event worker ${result.workerCpuUs}, destination ${result.sinkCpuUs}, ceiling client ${result.ceilingCpuUs}`,
      );
      results.push(result);
    }
    return { name: 'plugin delivery', at: new Date().toISOString(), events: n, settings, cases: results };
  } finally {
    for (const p of processes.reverse()) await p.stop().catch(() => undefined);
    await servers.stop();
  }
}

export function pluginDeliveryTable(r: PluginDeliveryResult): Table {
  const s = r.settings;
  return {
    title: 'Plugins: a destination delivering to a local HTTP server (bench/plugins/delivery.ts)',
    note:
      `${r.events.toLocaleString('en-US')} processed events (~430 bytes) already on PROCESSED, delivered by one worker process to a uWS server in another, ` +
      `timed at the server from 10 % to 90 % of the events; the ceiling sends the same requests straight to the same server from a process of its own, with the worker's HTTP client (undici) and settings ` +
      `(${s.connections} connections, pipelining ${s.pipelining}, ${s.inFlight} in flight; batches of ${s.batch}). CPU µs per event of each process (user + system, /proc). Target: ≥ 20,000 events/s.`,
    columns: ['destination', 'events/s', 'ceiling events/s', 'of the ceiling', 'requests', 'CPU µs/event: worker', 'server', 'ceiling client'],
    rows: r.cases.map((c) => [c.case, c.spate, c.ceiling, `${Math.round((100 * c.spate) / Math.max(1, c.ceiling))} %`, c.requests, c.workerCpuUs, c.sinkCpuUs, c.ceilingCpuUs]),
  };
}

const USAGE = `usage: npx tsx bench/plugins/delivery.ts [--events N] [--case I]… [--connections N] [--pipelining N] [--in-flight N] [--batch N]

A destination plugin (composeWebhook, and onEvent batching through fetch) delivering N processed
events (default 200,000) from a worker process to a local HTTP server, and the same requests sent
straight to it (the ceiling); prints events/s and CPU per event as JSON. \`npm run bench -- --only
"plugin delivery"\` runs the same and writes the report to bench/results/.

  --events N        processed events delivered per case (default 200000)
  --case I          only case I (0: composeWebhook whole event, 1: four fields, 2: onEvent batching); repeatable
  --connections N   PLUGIN_WEBHOOK_CONNECTIONS (default ${DEFAULT_DELIVERY_SETTINGS.connections})
  --pipelining N    PLUGIN_WEBHOOK_PIPELINING (default ${DEFAULT_DELIVERY_SETTINGS.pipelining})
  --in-flight N     PLUGIN_WEBHOOK_IN_FLIGHT (default ${DEFAULT_DELIVERY_SETTINGS.inFlight})
  --batch N         PLUGIN_DELIVERY_BATCH (default ${DEFAULT_DELIVERY_SETTINGS.batch})
  -h, --help        this text`;

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseBenchArgs(USAGE, {
    options: {
      events: { type: 'string' },
      connections: { type: 'string' },
      pipelining: { type: 'string' },
      'in-flight': { type: 'string' },
      batch: { type: 'string' },
      case: { type: 'string', multiple: true },
    },
  });
  const int = (name: string, value: string | undefined, def: number) => {
    if (value === undefined) return def;
    const v = Number(value);
    if (!Number.isInteger(v) || v < 1) usageError(USAGE, `--${name} must be a positive integer (got ${value})`);
    return v;
  };
  const d = DEFAULT_DELIVERY_SETTINGS;
  const settings = {
    connections: int('connections', values.connections, d.connections),
    pipelining: int('pipelining', values.pipelining, d.pipelining),
    inFlight: int('in-flight', values['in-flight'], d.inFlight),
    batch: int('batch', values.batch, d.batch),
  };
  const cases = values.case?.map((c) => {
    const i = Number(c);
    if (!Number.isInteger(i) || !DELIVERY_CASES[i]) usageError(USAGE, `--case must be 0 to ${DELIVERY_CASES.length - 1} (got ${c})`);
    return i;
  });
  const result = await runPluginDelivery({ events: int('events', values.events, 200_000), settings, cases, log: (m) => console.error(m) });
  console.log(JSON.stringify(result, null, 2));
}
