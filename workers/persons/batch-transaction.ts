// One batch of a (stream, shard), exactly once in effect, as named steps:
//   parse → prepare (group types, dedup partition) → open (plan the end, BEGIN, lock the position
//   row) → dedup uuids → load persons → compute in memory → lock changed persons and write
//   everything → publish to PROCESSED with ids derived from source sequences (groups written
//   alongside) → COMMIT.
// A crash after publishing and before COMMIT replays the planned batch exactly: same ids, and
// JetStream drops the copies inside its duplicate window.
import type { JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type pg from 'pg';
import { HEADER_EVENT_COUNT, type StreamKind } from '../../lib/index.js';
import { beginBatch, isTransientDbError, lockPosition, OwnershipLostError, planBatch } from '../coordination/index.js';
import { checkCapturedEvent, packOutputs, parseMessages, processedLine, type BatchEvent, type OutputLine, type ParsedBatch, type SourceMessage } from './batch-codec.js';
import type { Batch } from './batch-planner.js';
import { recordEvents, recordNewEvents } from './dedup.js';
import type { PartitionContext } from './partition-context.js';
import { loadPersons, lockPersons, writeBatch, type LoadedPersons } from './person-store.js';
import { PersonWorkspace, type PersonWrites } from './person-workspace.js';
import { distinctIdsToLoad, groupTypesOf, processEvents, type IngestionWarning, type ProcessResult } from './process-events.js';

/** What a batch needs to know of its partition. */
export interface PartitionState {
  readonly kind: StreamKind;
  readonly streamName: string;
  readonly shard: number;
  readonly fence: number;
  /** The committed position the batch starts after. */
  readonly position: number;
  /** The last batch had duplicates: go straight to the dedup query that says which, not the cheap one. */
  duplicatesLikely: boolean;
  /** End of the next batch as buffered now: planned with this batch's commit. */
  nextPlannedEnd(): number | undefined;
  leaseValid(): boolean;
}

export interface CommittedBatch {
  end: number;
  nextPlannedEnd: number | undefined;
}

/** Processes `batch` in one transaction and commits it; throws (rolled back) on any failure. */
export async function processBatch(ctx: PartitionContext, partition: PartitionState, batch: Batch): Promise<CommittedBatch> {
  const phases = new PhaseClock();
  const sources = sourcesOf(batch.messages);
  // Parsed afresh on every attempt: processing changes events in place.
  const parsed = parseMessages(partition.kind, sources);
  const parsedEvents = parsed.events.length;
  parsed.events = await runHooks(ctx, partition, parsed.events);
  const generation = await prepare(ctx, parsed);
  phases.end('prepare');

  const client = await ctx.pool.connect();
  phases.end('connect');
  let broken = false;
  try {
    await open(client, partition, batch, sources);
    phases.end('lock');
    const { events, duplicates } = await dedup(client, partition, parsed, generation);
    phases.end('dedup');
    const loaded = await load(ctx, client, events);
    phases.end('load');
    const computed = compute(ctx, events, loaded);
    phases.end('compute');
    const warnings = [...parsed.warnings, ...computed.result.warnings];
    const nextPlannedEnd = partition.nextPlannedEnd();
    await write(client, partition, batch, computed, warnings, nextPlannedEnd);
    phases.end('write');
    const publishedAt = await publish(ctx, partition, sources, parsed, events, computed.result);
    phases.end('publish');
    await ctx.faults?.afterPublish?.({ stream: partition.streamName, shard: partition.shard, first: sources[0]!.seq, last: batch.end });
    await commit(client, partition);
    phases.end('commit');

    ctx.cache.applyCommitted(computed.writes);
    recordMetrics(ctx, partition, { sources, parsed, parsedEvents, computed, warnings, duplicates, loaded, publishedAt, phases });
    return { end: batch.end, nextPlannedEnd };
  } catch (err) {
    broken = isTransientDbError(err);
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

function sourcesOf(messages: readonly JsMsg[]): SourceMessage[] {
  return messages.map((m) => ({ seq: m.seq, subject: m.subject, data: m.data, storedAtMs: Math.floor(m.info.timestampNanos / 1e6) }));
}

/**
 * The hooks before person processing (transformations: coordination/event-hooks.ts). A replaced
 * event is checked like a captured line and written out from its new content; its dedup key
 * stays the captured one.
 */
async function runHooks(ctx: PartitionContext, partition: PartitionState, events: BatchEvent[]): Promise<BatchEvent[]> {
  if (ctx.hooks.size === 0 || events.length === 0) return events;
  return ctx.hooks.run({ stream: partition.streamName, shard: partition.shard }, events, (entry, event, hook) => {
    const problem = { reason: '' };
    const checked = checkCapturedEvent(event, problem);
    if (!checked) throw new TypeError(`hook ${hook} replaced event ${entry.event.uuid} with one that is not a captured event: ${problem.reason}`);
    entry.event = checked.event;
    entry.span = undefined;
  });
}

/** Group type indexes and the dedup partition the batch needs, made outside its transaction. Returns the dedup generation. */
async function prepare(ctx: PartitionContext, parsed: ParsedBatch): Promise<number> {
  const wantedTypes: [number, string][] = [];
  for (const e of parsed.events) for (const t of groupTypesOf(e)) wantedTypes.push([e.projectId, t]);
  await ctx.groupTypes.ensure(ctx.pool, wantedTypes);
  const generation = ctx.dedup.current();
  await ctx.dedup.ensure(ctx.pool, generation);
  return generation;
}

/**
 * Makes the batch's end durable before anything of it is published (under load the previous
 * batch's commit planned it; otherwise it is written now, ahead of the transaction), then begins
 * the transaction holding the position row.
 */
async function open(client: pg.ClientBase, partition: PartitionState, batch: Batch, sources: readonly SourceMessage[]): Promise<void> {
  const { streamName, shard, fence, position } = partition;
  if (!batch.planned) await planBatch(client, streamName, shard, fence, position, sources[0]!.seq, batch.end, batch.replacing);
  await beginBatch(client);
  await lockPosition(client, streamName, shard, fence, position);
}

/** Records the batch's uuids; returns its events seen neither before nor earlier in the batch. */
async function dedup(
  client: pg.ClientBase,
  partition: PartitionState,
  parsed: ParsedBatch,
  generation: number,
): Promise<{ events: BatchEvent[]; duplicates: number }> {
  const firstSeen = new Map<string, BatchEvent>();
  for (const e of parsed.events) if (!firstSeen.has(e.key)) firstSeen.set(e.key, e);
  const unique = [...firstSeen.values()];
  const projectIds = unique.map((e) => e.projectId);
  const uuids = unique.map((e) => e.event.uuid);
  let seenBefore = new Set<string>();
  if (!partition.duplicatesLikely && !(await recordNewEvents(client, generation, projectIds, uuids))) {
    // Some were seen before: undo the insert (only the position lock precedes it) and ask which.
    await client.query('ROLLBACK');
    await beginBatch(client);
    await lockPosition(client, partition.streamName, partition.shard, partition.fence, partition.position);
    partition.duplicatesLikely = true;
  }
  if (partition.duplicatesLikely) {
    seenBefore = await recordEvents(client, generation, projectIds, uuids);
    // Back to the cheap path once a batch has none.
    partition.duplicatesLikely = seenBefore.size > 0;
  }
  const events = parsed.events.filter((e) => !seenBefore.has(e.key) && firstSeen.get(e.key) === e);
  return { events, duplicates: parsed.events.length - events.length };
}

/** The persons of every distinct id the events ask about (cached ones validated by version). */
function load(ctx: PartitionContext, client: pg.ClientBase, events: readonly BatchEvent[]): Promise<LoadedPersons> {
  const keys: [number, string][] = [];
  for (const e of events) for (const id of distinctIdsToLoad(e)) keys.push([e.projectId, id]);
  return loadPersons(client, keys, ctx.cache);
}

interface Computed {
  result: ProcessResult;
  writes: PersonWrites;
}

/** Every event's effect, in stream order, on the batch's workspace: nothing touches Postgres. */
function compute(ctx: PartitionContext, events: readonly BatchEvent[], loaded: LoadedPersons): Computed {
  const workspace = new PersonWorkspace(loaded.lookups, loaded.persons);
  const result = processEvents(events, workspace, (p, t) => ctx.groupTypes.indexOf(p, t));
  return { result, writes: workspace.writes() };
}

/** Locks the persons the batch changes (checking their versions), then writes every change and the new position. */
async function write(
  client: pg.ClientBase,
  partition: PartitionState,
  batch: Batch,
  { writes }: Computed,
  warnings: readonly IngestionWarning[],
  nextPlannedEnd: number | undefined,
): Promise<void> {
  const expected = new Map<string, number>();
  for (const u of writes.updates) expected.set(u.state.uuid, u.expectedVersion);
  for (const d of writes.deletes) expected.set(d.uuid, d.expectedVersion);
  await lockPersons(client, expected);
  await writeBatch(client, writes, warnings, {
    stream: partition.streamName,
    shard: partition.shard,
    fence: partition.fence,
    position: batch.end,
    nextPlannedEnd,
  });
}

/**
 * Publishes the processed events to PROCESSED, in parts whose ids depend only on the source
 * sequences they cover. Groups are written (outside the transaction, see group-writer.ts) at the
 * same time; both are done before COMMIT, so a replay repeats them. Returns when it was acknowledged.
 */
async function publish(
  ctx: PartitionContext,
  partition: PartitionState,
  sources: readonly SourceMessage[],
  parsed: ParsedBatch,
  events: readonly BatchEvent[],
  result: ProcessResult,
): Promise<number> {
  const lines: OutputLine[][] = sources.map(() => []);
  events.forEach((e, i) => {
    const out = result.outputs[i];
    if (out) lines[e.message]!.push(processedLine(out, parsed.bodies[e.message], e, result.untouched[i]!));
  });
  const parts = packOutputs(partition.streamName, partition.shard, sources, parsed.projects, lines, ctx.limits.publishPartBytes, ctx.maxPayload());
  const groupsWritten = ctx.groupWriter.write(result.groups);
  const [acks] = await Promise.all([
    Promise.all(
      parts.map((p) => {
        const h = headers();
        h.set(HEADER_EVENT_COUNT, String(p.events));
        return ctx.js.publish(p.subject, p.body, { msgID: p.msgId, headers: h, timeout: 10_000 });
      }),
    ),
    groupsWritten,
  ]);
  const publishedAt = Date.now();
  const duplicated = acks.filter((a) => a.duplicate).length;
  if (duplicated > 0) ctx.metrics.publishDuplicates.inc(duplicated);
  return publishedAt;
}

async function commit(client: pg.ClientBase, partition: PartitionState): Promise<void> {
  if (!partition.leaseValid()) throw new OwnershipLostError('lease lapsed before commit');
  await client.query('COMMIT');
}

function recordMetrics(
  ctx: PartitionContext,
  partition: PartitionState,
  b: {
    sources: readonly SourceMessage[];
    parsed: ParsedBatch;
    parsedEvents: number;
    computed: Computed;
    warnings: readonly IngestionWarning[];
    duplicates: number;
    loaded: LoadedPersons;
    publishedAt: number;
    phases: PhaseClock;
  },
): void {
  const { metrics } = ctx;
  const stream = partition.streamName;
  for (const s of b.sources) metrics.processingLatency.observe({ stream }, Math.max(0, b.publishedAt - s.storedAtMs) / 1000);
  metrics.batchDuration.observe({ stream }, b.phases.totalMs() / 1000);
  metrics.batchEvents.observe(b.parsedEvents);
  for (const [name, ms] of b.phases.list) metrics.batchPhase.observe({ phase: name }, ms / 1000);
  for (const [kind, n] of b.computed.result.kinds) metrics.eventsProcessed.inc({ kind }, n);
  if (b.duplicates > 0) metrics.eventsProcessed.inc({ kind: 'duplicate' }, b.duplicates);
  // Dropped by a hook (a transformation returned null).
  if (b.parsedEvents > b.parsed.events.length) metrics.eventsProcessed.inc({ kind: 'dropped' }, b.parsedEvents - b.parsed.events.length);
  if (b.parsed.malformed > 0) metrics.eventsProcessed.inc({ kind: 'malformed' }, b.parsed.malformed);
  for (const w of b.warnings) metrics.warnings.inc({ type: w.type });
  metrics.personCache.inc({ result: 'hit' }, b.loaded.cacheHits);
  metrics.personCache.inc({ result: 'miss' }, b.loaded.cacheMisses);
}

/** Time spent in each phase of a batch (spate_worker_batch_phase_seconds). */
class PhaseClock {
  private readonly started = performance.now();
  private mark = this.started;
  readonly list: [string, number][] = [];

  end(phase: string): void {
    const now = performance.now();
    this.list.push([phase, now - this.mark]);
    this.mark = now;
  }

  totalMs(): number {
    return performance.now() - this.started;
  }
}
