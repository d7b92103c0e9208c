// Benchmark: what crossing into a plugin's sandbox costs, per call and per event, by what the
// plugin does (docs/plugins.md, "Sandbox figures").
//
//   npx tsx bench/plugins/sandbox-cost.ts [--events N] [--rounds N]   (or node dist/bench/plugins/sandbox-cost.js)
//
// One sandbox (workers/plugins/sandbox), batches of the worker benchmark's events (~330 bytes,
// bench/lib/worker-mix.ts); CPU time of this process (user + system) per event, the fastest of
// several rounds (a shared machine slows some rounds; none is faster than the work).
import { pathToFileURL } from 'node:url';
import { compilePluginSource } from '../../lib/index.js';
import { Sandbox, type SandboxBatch } from '../../workers/plugins/sandbox/index.js';
import { parseBenchArgs, usageError } from '../lib/cli.js';
import { MixGenerator, PROJECT } from '../lib/worker-mix.js';

export const SANDBOX_CASES: Record<string, string> = {
  'returns the event': 'export function processEvent(event) { return event }',
  'reads event.event': "export function processEvent(event) { if (event.event === 'never') return null; return event }",
  'sets a property': "export function processEvent(event) { event.properties.plugin = 'spate'; return event }",
  'reads a property, sets one': "export function processEvent(event) { event.properties.page = event.properties.$current_url ?? null; return event }",
  'async, returns the event': 'export async function processEvent(event) { return event }',
  'copies the event ({...event})': "export function processEvent(event) { return { ...event, properties: { ...event.properties, plugin: 'spate' } } }",
};

export interface SandboxCostRow {
  case: string;
  /** µs of CPU per event (batches of `events`). */
  perEventUs: number;
  /** µs of CPU for a batch of one event: the crossing. */
  perCallUs: number;
}

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

export async function runSandboxCost(events = 1_000, rounds = 7): Promise<SandboxCostRow[]> {
  const gen = new MixGenerator(20_000);
  const batch: SandboxBatch = { teamId: PROJECT, events: Array.from({ length: events }, () => gen.next()) };
  const single: SandboxBatch = { teamId: PROJECT, events: batch.events.slice(0, 1) };
  const rows: SandboxCostRow[] = [];
  for (const [name, source] of Object.entries(SANDBOX_CASES)) {
    const compiled = (await compilePluginSource(new Map([['index.ts', source]])))!;
    const sandbox = await Sandbox.create({
      code: compiled.code,
      file: 'index.ts',
      config: {},
      limits: { memoryBytes: 64 * 1024 * 1024, stackBytes: 1024 * 1024, cpuMs: 5_000, wallMs: 30_000 },
      host: { log: () => undefined, call: () => Promise.resolve(null) },
    });
    try {
      const time = async (b: SandboxBatch, times: number) => {
        let best = Infinity;
        for (let r = 0; r < rounds; r++) {
          const t0 = cpuUs();
          for (let i = 0; i < times; i++) await sandbox.runBatch('processEvent', 'event', b);
          best = Math.min(best, (cpuUs() - t0) / times);
        }
        return best;
      };
      // Warm-up: the JIT, WebAssembly tiers, the engine's heap.
      for (let i = 0; i < 20; i++) await sandbox.runBatch('processEvent', 'event', batch);
      const perBatch = await time(batch, 10);
      const perCall = await time(single, 200);
      rows.push({ case: name, perEventUs: Math.round((perBatch / events) * 100) / 100, perCallUs: Math.round(perCall * 10) / 10 });
    } finally {
      sandbox.dispose();
    }
  }
  return rows;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const usage = `usage: npx tsx bench/plugins/sandbox-cost.ts [--events N] [--rounds N]

CPU µs per event of one sandbox call on a batch of N events (default 1000), and µs of a call
on a batch of one event (the crossing), for plugins doing a little more each time.`;
  const { values } = parseBenchArgs(usage, { options: { events: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '7' } } });
  const events = Number(values.events);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(events) || events < 1 || !Number.isInteger(rounds) || rounds < 1) usageError(usage, '--events and --rounds must be positive whole numbers');
  const rows = await runSandboxCost(events, rounds);
  console.log(`sandbox cost, CPU µs (fastest of ${rounds} rounds; batches of ${events} events)`);
  console.log(`${'plugin'.padEnd(32)} ${'per event'.padStart(10)} ${'1-event call'.padStart(13)}`);
  for (const r of rows) console.log(`${r.case.padEnd(32)} ${r.perEventUs.toFixed(2).padStart(10)} ${r.perCallUs.toFixed(1).padStart(13)}`);
}
