// Benchmark: the worker's in-process work on one batch, without PostgreSQL or NATS: parse the
// source messages, process the events on a loaded workspace, and pack PROCESSED messages.
//
//   npx tsx bench/workers/batch-cpu.ts [--batches N] [--events N]   (or node dist/bench/workers/batch-cpu.js)
//
// The event mix is the worker throughput bench's (bench/lib/worker-mix.ts), 100 events per source
// message, every person known. This is the part of a worker's CPU per event that code changes
// here move most. It is steady enough to compare two builds on a noisy machine (the fastest of
// several rounds, runs of both builds interleaved), where the full bench (throughput.ts) moves
// ±20% with the host.
import { pathToFileURL } from 'node:url';
import { toNdjson } from '../../lib/index.js';
import { packOutputs, parseMessages, processedLine, type BatchEvent, type OutputLine, type SourceMessage } from '../../workers/persons/batch-codec.js';
import { distinctIdKey, personUuidFor, PersonWorkspace, type PersonState } from '../../workers/persons/person-workspace.js';
import { distinctIdsToLoad, processEvents } from '../../workers/persons/process-events.js';
import { parseBenchArgs, usageError } from '../lib/cli.js';
import { MixGenerator, PROJECT } from '../lib/worker-mix.js';

const PERSONS = 20_000;
const PER_MESSAGE = 100;

interface Timings {
  parse: number;
  process: number;
  pack: number;
}

/** One batch's source messages, as ingest publishes them. */
export function makeBatch(events: number, gen: MixGenerator): SourceMessage[] {
  const messages: SourceMessage[] = [];
  for (let i = 0; i < events; i += PER_MESSAGE) {
    const chunk = Array.from({ length: Math.min(PER_MESSAGE, events - i) }, () => gen.next());
    messages.push({ seq: messages.length + 1, subject: `events.${PROJECT}.0`, data: Buffer.from(toNdjson(chunk)), storedAtMs: Date.now() });
  }
  return messages;
}

/** The person a preloaded distinct id has (every user-N), as loadPersons would return it. */
export function knownPerson(distinctId: string): PersonState | undefined {
  if (!distinctId.startsWith('user-')) return undefined;
  return {
    uuid: personUuidFor(PROJECT, distinctId),
    projectId: PROJECT,
    properties: { email: `${distinctId}@example.com`, name: distinctId, plan: 'free' },
    isIdentified: true,
    createdAt: '2024-01-01T00:00:00.000Z',
    version: 1,
  };
}

/** The workspace loadPersons would fill for these events: every user-N known, every other id new. */
export function loadedWorkspace(events: readonly BatchEvent[]): PersonWorkspace {
  const lookups = new Map<string, string | null>();
  const persons = new Map<string, PersonState>();
  for (const e of events) {
    for (const id of distinctIdsToLoad(e)) {
      const person = knownPerson(id);
      lookups.set(distinctIdKey(e.projectId, id), person?.uuid ?? null);
      if (person) persons.set(person.uuid, person);
    }
  }
  return new PersonWorkspace(lookups, persons);
}

function runBatch(messages: SourceMessage[]): Timings {
  const t0 = performance.now();
  const parsed = parseMessages('events', messages);
  const t1 = performance.now();
  const workspace = loadedWorkspace(parsed.events);
  const t2 = performance.now();
  const result = processEvents(parsed.events, workspace, (_p, type) => (type === 'company' ? 0 : type === 'team' ? 1 : undefined));
  workspace.writes();
  const t3 = performance.now();
  const lines: OutputLine[][] = messages.map(() => []);
  parsed.events.forEach((e, i) => {
    const out = result.outputs[i];
    if (out) lines[e.message]!.push(processedLine(out, parsed.bodies[e.message], e, result.untouched[i]!));
  });
  packOutputs('EVENTS', 0, messages, parsed.projects, lines, 1024 * 1024, 8 * 1024 * 1024);
  const t4 = performance.now();
  return { parse: t1 - t0, process: t3 - t2, pack: t4 - t3 };
}

// The fastest round: on a shared machine, slower rounds are mostly other work taking the CPU.
const fastest = (values: number[]) => Math.min(...values);

export function runBatchCpu(batches: number, eventsPerBatch: number, rounds = 7): Record<keyof Timings | 'total', number> {
  const gen = new MixGenerator(PERSONS);
  const sources = Array.from({ length: batches }, () => makeBatch(eventsPerBatch, gen));
  // Warm-up: the JIT, and the heap grown to its working size.
  for (const messages of sources) runBatch(messages);
  const perRound: Timings[] = [];
  for (let r = 0; r < rounds; r++) {
    const sum: Timings = { parse: 0, process: 0, pack: 0 };
    for (const messages of sources) {
      const t = runBatch(messages);
      sum.parse += t.parse;
      sum.process += t.process;
      sum.pack += t.pack;
    }
    perRound.push(sum);
  }
  const events = batches * eventsPerBatch;
  const perEvent = (pick: (t: Timings) => number) => Math.round((fastest(perRound.map(pick)) * 1000 * 100) / events) / 100;
  return {
    parse: perEvent((t) => t.parse),
    process: perEvent((t) => t.process),
    pack: perEvent((t) => t.pack),
    total: perEvent((t) => t.parse + t.process + t.pack),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const usage = `usage: npx tsx bench/workers/batch-cpu.ts [--batches N] [--events N]

The worker's in-process work on one batch, without PostgreSQL or NATS: parse, process and pack,
in µs per event (the fastest of 7 rounds). Steady enough to compare two builds on one machine.

  --batches N   batches per round (default 20)
  --events N    events per batch (default 8000)
  -h, --help    this text`;
  const { values } = parseBenchArgs(usage, { options: { batches: { type: 'string', default: '20' }, events: { type: 'string', default: '8000' } } });
  const batches = Number(values.batches);
  const events = Number(values.events);
  if (!Number.isInteger(batches) || batches < 1 || !Number.isInteger(events) || events < 1) usageError(usage, '--batches and --events must be positive whole numbers');
  const figures = runBatchCpu(batches, events);
  console.log('worker batch CPU path, µs/event (fastest of 7 rounds; wall time, GC included)');
  for (const [stage, us] of Object.entries(figures)) console.log(`  ${stage.padEnd(8)} ${us}`);
}
