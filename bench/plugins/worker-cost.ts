// Benchmark: what one transformation adds per event to the worker (issue 19's target: ≤ 2 µs for
// a trivial one), measured side by side in one process: the worker's in-process work on a batch
// (bench/workers/batch-cpu.ts: parse, process, pack) without plugins, and the same with the
// plugins role's hook and one plugin, in turns, the fastest of several rounds each.
//
//   npx tsx bench/plugins/worker-cost.ts [--batches N] [--events N] [--rounds N]
//
// The hook and the instance are the runtime's own (workers/plugins: transformationHook,
// PluginInstance, its sandbox); what stands in for NATS and PostgreSQL is what a trivial plugin never
// reaches (KV, logs, storage). Events: the worker benchmark's mix, 100 per source message.
import { pathToFileURL } from 'node:url';
import type { JetStreamClient } from '@nats-io/jetstream';
import type pg from 'pg';
import { compilePluginSource, createLogger, generateSecretKey, parseSecretKey, Registry, secretKeyring, type PluginConfigsRecord } from '../../lib/index.js';
import { EventHooks } from '../../workers/coordination/index.js';
import { packOutputs, parseMessages, processedLine, type OutputLine, type SourceMessage } from '../../workers/persons/batch-codec.js';
import { loadedWorkspace, makeBatch } from '../workers/batch-cpu.js';
import { applyHooks } from '../../workers/persons/batch-transaction.js';
import { processEvents } from '../../workers/persons/process-events.js';
import type { PluginCatalog } from '../../workers/plugins/catalog.js';
import { PluginInstance } from '../../workers/plugins/instance.js';
import { PluginLogs } from '../../workers/plugins/logs.js';
import { createPluginMetrics } from '../../workers/plugins/metrics.js';
import { transformationHook } from '../../workers/plugins/transformations.js';
import { parseBenchArgs, usageError } from '../lib/cli.js';
import { MixGenerator, PROJECT } from '../lib/worker-mix.js';

/** The transformations measured; the first is the target's "trivial transformation". */
export const WORKER_PLUGIN_CASES: Record<string, string> = {
  'returns the event': 'export function processEvent(event) { return event }',
  'reads event.event': "export function processEvent(event) { return event.event === 'never' ? null : event }",
  'sets a property': "export function processEvent(event) { event.properties.plugin = 'spate'; return event }",
};

export interface WorkerPluginCostRow {
  case: string;
  /** CPU µs per event of the worker's batch path, fastest round. */
  usPerEvent: number;
  /** Added over the same path without plugins, in the same rounds. */
  addedUs: number;
}

const PERSONS = 20_000;

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

async function runBatch(messages: SourceMessage[], hooks: EventHooks): Promise<number> {
  const t0 = cpuMs();
  const parsed = parseMessages('events', messages);
  parsed.events = await applyHooks(hooks, { stream: 'EVENTS', shard: 0 }, parsed.events, parsed.bodies, 8 * 1024 * 1024);
  const t1 = cpuMs();
  const workspace = loadedWorkspace(parsed.events);
  const t2 = cpuMs();
  const result = processEvents(parsed.events, workspace, (_p, type) => (type === 'company' ? 0 : type === 'team' ? 1 : undefined));
  workspace.writes();
  const lines: OutputLine[][] = messages.map(() => []);
  parsed.events.forEach((e, i) => {
    const out = result.outputs[i];
    if (out) lines[e.message]!.push(processedLine(out, parsed.bodies[e.message], e, result.untouched[i]!));
  });
  packOutputs('EVENTS', 0, messages, parsed.projects, lines, 1024 * 1024, 8 * 1024 * 1024);
  // The loads stand in for PostgreSQL: not the worker's CPU.
  return cpuMs() - t0 - (t2 - t1);
}

/** The plugins role's hook with one real instance of `source`, without NATS or PostgreSQL behind it. */
async function pluginHooks(source: string): Promise<{ hooks: EventHooks; instance: PluginInstance; stop: () => Promise<void> }> {
  const compiled = (await compilePluginSource(new Map([['index.ts', source]])))!;
  const registry = new Registry();
  const logger = createLogger('bench', 'silent');
  const metrics = createPluginMetrics(registry, () => new Map());
  // A trivial plugin writes no logs and touches no storage: these are never reached.
  const logs = new PluginLogs({} as JetStreamClient, { ratePerSecond: 100 }, logger);
  const entry: PluginConfigsRecord['configs'][number] = {
    id: 1,
    plugin_id: 1,
    order: 1,
    config: {},
    plugin: { name: 'Bench', plugin_type: 'source', url: null, tag: null, capabilities: { methods: ['processEvent'] }, updated_at: '2026-01-01T00:00:00Z', source_hash: compiled.hash },
    updated_at: '2026-01-01T00:00:00Z',
  };
  const instance = new PluginInstance(PROJECT, entry, {
    nc: undefined as never,
    logs,
    db: {} as pg.Pool,
    egress: undefined as never,
    keyring: secretKeyring(parseSecretKey(generateSecretKey())),
    limits: { memoryBytes: 64 * 1024 * 1024, stackBytes: 1024 * 1024, cpuMs: 5_000, wallMs: 30_000 },
    setup: { attempts: 1, backoffMs: 1_000 },
    breaker: { failures: 0, of: 100, timeouts: 0 },
    logger,
    metrics,
    code: () => Promise.resolve(compiled.code),
  });
  if (!(await instance.ready())) throw new Error('the bench plugin did not set up');
  const catalog = { noTransformations: false, transformations: () => [entry], acquire: () => instance } as unknown as PluginCatalog;
  const hooks = new EventHooks();
  hooks.add('plugins', transformationHook(catalog, metrics, { maxChangeChars: () => 512 * 1024 }, logger));
  return { hooks, instance, stop: async () => (await instance.stop(), await logs.stop()) };
}

export async function runWorkerPluginCost(batches = 10, eventsPerBatch = 8_000, rounds = 7): Promise<{ withoutUs: number; rows: WorkerPluginCostRow[] }> {
  const gen = new MixGenerator(PERSONS);
  const sources = Array.from({ length: batches }, () => makeBatch(eventsPerBatch, gen));
  const none = new EventHooks();
  const cases = [];
  for (const [name, source] of Object.entries(WORKER_PLUGIN_CASES)) cases.push({ name, ...(await pluginHooks(source)) });
  const events = batches * eventsPerBatch;
  const round = async (hooks: EventHooks) => {
    let ms = 0;
    for (const messages of sources) ms += await runBatch(messages, hooks);
    return (ms * 1000) / events;
  };
  // Warm-up: the JIT, WebAssembly tiers, heaps.
  for (let i = 0; i < 2; i++) {
    await round(none);
    for (const c of cases) await round(c.hooks);
  }
  let withoutUs = Infinity;
  const best = new Map<string, number>();
  // In turns, so a slow moment of the machine hits every case alike.
  for (let r = 0; r < rounds; r++) {
    withoutUs = Math.min(withoutUs, await round(none));
    for (const c of cases) best.set(c.name, Math.min(best.get(c.name) ?? Infinity, await round(c.hooks)));
  }
  for (const c of cases) await c.stop();
  const r2 = (n: number) => Math.round(n * 100) / 100;
  return { withoutUs: r2(withoutUs), rows: cases.map((c) => ({ case: c.name, usPerEvent: r2(best.get(c.name)!), addedUs: r2(best.get(c.name)! - withoutUs) })) };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const usage = `usage: npx tsx bench/plugins/worker-cost.ts [--batches N] [--events N] [--rounds N]

The worker's batch path without plugins and with one transformation, CPU µs per event (fastest of
the rounds, in turns), and what the plugin adds.`;
  const { values } = parseBenchArgs(usage, { options: { batches: { type: 'string', default: '10' }, events: { type: 'string', default: '8000' }, rounds: { type: 'string', default: '7' } } });
  const [batches, events, rounds] = [Number(values.batches), Number(values.events), Number(values.rounds)];
  if (![batches, events, rounds].every((n) => Number.isInteger(n) && n >= 1)) usageError(usage, '--batches, --events and --rounds must be positive whole numbers');
  const { withoutUs, rows } = await runWorkerPluginCost(batches, events, rounds);
  console.log(`worker batch path without plugins: ${withoutUs} µs/event`);
  for (const r of rows) console.log(`  + ${r.case.padEnd(20)} ${r.usPerEvent.toFixed(2)} µs/event (+${r.addedUs.toFixed(2)})`);
}
