// The batch of a (stream, shard), or the batches of several (batch-turns.ts), exactly once in
// effect, as named steps:
//   parse → hooks (transformations) → prepare (group types, dedup partition) → open (plan the
//   ends, BEGIN, lock the position rows) → dedup uuids → load persons → compute in memory → lock
//   changed persons and write everything → publish to PROCESSED with ids derived from source
//   sequences (groups written alongside) → COMMIT.
// A crash after publishing and before COMMIT replays the planned batch exactly: same ids, and
// JetStream drops the copies inside its duplicate window.
// A trial (poison-isolation.ts) runs the same steps on some of the batch's events up to the
// publish, writes the groups inside its transaction, and rolls everything back.
import type { JsMsg } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type pg from 'pg';
import { cleanStrings, groupsGrowth, hasHostileText, HEADER_EVENT_COUNT, MAX_GROUPS_GROWTH, type CapturedEvent, type StreamKind } from '../../lib/index.js';
import { beginBatch, HookedEventTooLargeError, isTransientDbError, lockPositions, OwnershipLostError, planBatch, planBatches, type EventHooks } from '../coordination/index.js';
import {
  bodyRoom,
  checkCapturedEvent,
  lineRoom,
  packOutputs,
  parseMessages,
  propertiesInsertAt,
  processedLine,
  type BatchEvent,
  type OutputLine,
  type OutputPart,
  type ParsedBatch,
  type SourceMessage,
} from './batch-codec.js';
import type { Batch } from './batch-planner.js';
import { recordEvents, recordNewEvents } from './dedup.js';
import { assignKeys } from './event-rules.js';
import type { PartitionContext } from './partition-context.js';
import { insertWarnings, loadPersons, lockPersons, upsertGroups, writeBatch, type LoadedPersons } from './person-store.js';
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

/** A processed line too big for any NATS message: it can never be published. */
export class OutputTooLargeError extends Error {
  override name = 'OutputTooLargeError';
}

/** A partition's batch in a transaction; a transaction may hold several partitions' batches. */
export interface BatchUnit {
  partition: PartitionState;
  batch: Batch;
}

/**
 * Processes `batch` in one transaction and commits it; throws (rolled back) on any failure.
 * Events in `batch.failed` are recorded as seen and reported, not processed.
 */
export async function processBatch(ctx: PartitionContext, partition: PartitionState, batch: Batch): Promise<CommittedBatch> {
  const [committed] = await run(ctx, [{ partition, batch }], undefined);
  return committed!;
}

/**
 * Processes the batches of several partitions in one transaction: most of a batch's cost (its
 * statements, its commit, its connection) is the same for 50 events as for 5,000, and at moderate
 * rates each partition's batch is small. Each partition keeps its own plan, position, fence and
 * PROCESSED message ids, exactly as if processed alone; any failure fails them all (rolled back),
 * and the caller processes each alone (batch-turns.ts), where failures are told apart.
 */
export function processBatches(ctx: PartitionContext, units: readonly BatchUnit[]): Promise<CommittedBatch[]> {
  return run(ctx, units, undefined);
}

/**
 * Runs the batch's steps with only the events whose key is in `keep` (and not failed), up to
 * publishing, and rolls back: resolves when they would process, throws what they fail with.
 */
export async function tryBatch(ctx: PartitionContext, partition: PartitionState, batch: Batch, keep: ReadonlySet<string>): Promise<void> {
  await run(ctx, [{ partition, batch }], keep);
}

/** The dedup keys of the batch's events in stream order, each once, leaving out the failed ones. */
export function candidateKeys(kind: StreamKind, batch: Batch): string[] {
  const keys = new Set<string>();
  for (const e of parseMessages(kind, sourcesOf(batch.messages)).events) if (!batch.failed.has(e.key)) keys.add(e.key);
  return [...keys];
}

/** One unit's part of a transaction. */
interface UnitWork extends BatchUnit {
  sources: SourceMessage[];
  parsed: ParsedBatch;
  parsedEvents: number;
  /** Events left out as failing (batch.failed), recorded as seen. */
  failedEvents: BatchEvent[];
  droppedByHooks: number;
}

async function run(ctx: PartitionContext, units: readonly BatchUnit[], trial: ReadonlySet<string> | undefined): Promise<CommittedBatch[]> {
  const phases = new PhaseClock();
  const work: UnitWork[] = [];
  for (const { partition, batch } of units) {
    const sources = sourcesOf(batch.messages);
    // Parsed afresh on every attempt: processing changes events in place.
    const parsed = parseMessages(partition.kind, sources);
    const parsedEvents = parsed.events.length;
    const failedEvents = trial || batch.failed.size === 0 ? [] : parsed.events.filter((e) => batch.failed.has(e.key));
    const live = !trial && batch.failed.size === 0 ? parsed.events : parsed.events.filter((e) => !batch.failed.has(e.key) && (!trial || trial.has(e.key)));
    parsed.events = await runHooks(ctx, partition, live, parsed.bodies);
    work.push({ partition, batch, sources, parsed, parsedEvents, failedEvents, droppedByHooks: live.length - parsed.events.length });
  }
  // Every unit's events, unit after unit (each in stream order), and which unit each is of.
  const unitOf = new Map<BatchEvent, number>();
  const allEvents: BatchEvent[] = [];
  const allFailed: BatchEvent[] = [];
  for (let u = 0; u < work.length; u++) {
    for (const e of work[u]!.parsed.events) {
      unitOf.set(e, u);
      allEvents.push(e);
    }
    for (const e of work[u]!.failedEvents) {
      unitOf.set(e, u);
      allFailed.push(e);
    }
  }
  const generation = await prepare(ctx, allEvents);
  phases.end('prepare');

  const client = await ctx.pool.connect();
  phases.end('connect');
  let broken = false;
  try {
    await open(client, work, !trial);
    phases.end('lock');
    const { events, failed, duplicates } = await dedup(client, work, allEvents, allFailed, generation);
    phases.end('dedup');
    const loaded = await load(ctx, client, events);
    phases.end('load');
    const computed = compute(ctx, events, loaded);
    phases.end('compute');
    const warnings = [...work.flatMap((w) => w.parsed.warnings), ...computed.result.warnings, ...failedWarnings(failed, work, unitOf)];
    const nextPlannedEnds = work.map((w) => w.partition.nextPlannedEnd());
    await write(client, work, computed, warnings, nextPlannedEnds);
    phases.end('write');
    const parts = outputs(ctx, work, unitOf, events, computed.result);
    if (trial) {
      // What the group writer would do, inside this transaction: a group the data cannot be written for fails here too.
      await upsertGroups(client, computed.result.groups, ctx.limits.maxPropertiesBytes);
      await client.query('ROLLBACK');
      return [];
    }
    // A unit's lease lapsed: fail before publishing, not only at COMMIT. Each unit then runs again
    // alone, and no PROCESSED message stands computed beside another shard's uncommitted writes.
    checkLeases(work);
    const { publishedAt, refusedGroups } = await publish(ctx, parts, computed.result);
    phases.end('publish');
    for (const w of work) {
      await ctx.faults?.afterPublish?.({ stream: w.partition.streamName, shard: w.partition.shard, first: w.sources[0]!.seq, last: w.batch.end });
    }
    const groupWarnings = refusedGroupWarnings(refusedGroups, ctx.limits.maxPropertiesBytes);
    await insertWarnings(client, groupWarnings);
    await commit(client, work);
    phases.end('commit');

    ctx.cache.applyCommitted(computed.writes);
    const failedOf = (u: number) => failed.filter((e) => unitOf.get(e) === u).length;
    recordMetrics(ctx, {
      work,
      failed: work.map((_, u) => failedOf(u)),
      duplicates,
      computed,
      warnings: [...warnings, ...groupWarnings],
      loaded,
      publishedAt,
      phases,
    });
    return work.map((w, u) => ({ end: w.batch.end, nextPlannedEnd: nextPlannedEnds[u] }));
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
function runHooks(ctx: PartitionContext, partition: PartitionState, events: BatchEvent[], bodies: readonly Buffer[]): Promise<BatchEvent[]> {
  return applyHooks(ctx.hooks, { stream: partition.streamName, shard: partition.shard }, events, bodies, ctx.maxPayload());
}

/**
 * Runs the hooks on a batch's parsed events (`bodies`: its source messages); the events left. A
 * change whose line, with what processing adds to it, would not fit a PROCESSED message alone
 * (lineRoom less the event's groupsGrowth) is refused (HookedEventTooLargeError, the event left as
 * it was): its message could never be published, and the batch would isolate the event as poison.
 */
export async function applyHooks(
  hooks: EventHooks,
  where: { stream: string; shard: number },
  events: BatchEvent[],
  bodies: readonly Buffer[],
  maxPayload: number,
): Promise<BatchEvent[]> {
  if (hooks.size === 0 || events.length === 0) return events;
  const room = lineRoom(maxPayload, where.stream, where.shard);
  // `$group_N` is looked at only for a line near the room (most lines are far below it).
  const fits = (entry: BatchEvent, size: number, properties: Readonly<Record<string, unknown>>) => {
    if (size <= room - MAX_GROUPS_GROWTH) return;
    const limit = room - groupsGrowth(properties);
    if (size > limit) throw new HookedEventTooLargeError(entry.event.uuid, size, limit);
  };
  // Serialised now, not after processing: its size is known before it is taken, and processing
  // copies these bytes (plus person_id) when it changes nothing else.
  const replaced = (entry: BatchEvent, event: CapturedEvent, hook: string) => {
    const problem = { reason: '' };
    const checked = checkCapturedEvent(event, problem);
    if (!checked) throw new TypeError(`hook ${hook} replaced event ${entry.event.uuid} with one that is not a captured event: ${problem.reason}`);
    const { value: taken, json } = cleanedJson(checked.event);
    const body = Buffer.from(json);
    fits(entry, body.length, taken.properties);
    entry.event = taken;
    entry.body = body;
    entry.span = { start: 0, end: body.length };
    entry.insert = undefined;
  };
  // The JSON of the last properties object added, and its bytes: hooks pass one object for many events.
  let lastAdded: Readonly<Record<string, unknown>> | undefined;
  let lastTaken: Readonly<Record<string, unknown>> = {};
  let lastJson = '';
  let lastBytes: { empty: Buffer; more: Buffer } | undefined;
  const added = (entry: BatchEvent, properties: Readonly<Record<string, unknown>>, hook: string) => {
    const current = entry.event.properties;
    for (const key in properties) {
      // A key it has: the line cannot simply gain it.
      if (Object.hasOwn(current, key)) return replaced(entry, withProperties(entry.event, properties), hook);
    }
    if (properties !== lastAdded) {
      lastAdded = properties;
      ({ value: lastTaken, json: lastJson } = cleanedJson(properties));
      lastBytes = undefined;
    }
    if (lastJson.length <= 2) return;
    const body = entry.body ?? bodies[entry.message];
    const span = entry.span;
    const at = body && span ? propertiesInsertAt(body, span) : undefined;
    // No bytes to write into: serialised (as it would be after processing anyway).
    if (!span || !at || (entry.insert && entry.insert.at !== at.at)) return replaced(entry, withProperties(entry.event, properties), hook);
    // `"k":v,…` after the object's `{` (a comma when it has members, or had some inserted before).
    const members = lastJson.slice(1, -1);
    lastBytes ??= { empty: Buffer.from(members), more: Buffer.from(`${members},`) };
    const before = entry.insert?.bytes;
    const bytes = before || !at.empty ? lastBytes.more : lastBytes.empty;
    const size = span.end - span.start + (before?.length ?? 0) + bytes.length;
    fits(entry, size, Object.hasOwn(lastTaken, '$groups') ? lastTaken : current);
    // The event is this attempt's own parse: changed in place, as processing does.
    assignKeys(current, lastTaken);
    entry.insert = { at: at.at, bytes: before ? Buffer.concat([bytes, before]) : bytes };
  };
  return hooks.run(where, events, replaced, added);
}

/**
 * `value` and its JSON. A hook's strings may hold what capture never lets through (NUL, lone
 * surrogates), which PostgreSQL refuses in person properties: cleaned as parseMessages cleans a line.
 */
function cleanedJson<T>(value: T): { value: T; json: string } {
  const json = JSON.stringify(value);
  if (!hasHostileText(json)) return { value, json };
  const cleaned = cleanStrings(value) as T;
  return { value: cleaned, json: JSON.stringify(cleaned) };
}

function withProperties(event: CapturedEvent, properties: Readonly<Record<string, unknown>>): CapturedEvent {
  return { ...event, properties: { ...event.properties, ...properties } };
}

/** Group type indexes and the dedup partition the batch needs, made outside its transaction. Returns the dedup generation. */
async function prepare(ctx: PartitionContext, events: readonly BatchEvent[]): Promise<number> {
  const wantedTypes: [number, string][] = [];
  for (const e of events) for (const t of groupTypesOf(e)) wantedTypes.push([e.projectId, t]);
  await ctx.groupTypes.ensure(ctx.pool, wantedTypes);
  const generation = ctx.dedup.current();
  await ctx.dedup.ensure(ctx.pool, generation);
  return generation;
}

/**
 * Makes each batch's end durable before anything of it is published (under load the previous
 * batch's commit planned it; otherwise it is written now, ahead of the transaction), then begins
 * the transaction holding the position rows. A trial publishes nothing and plans nothing.
 */
async function open(client: pg.ClientBase, work: readonly UnitWork[], plan: boolean): Promise<void> {
  const plans = plan ? work.filter((w) => !w.batch.planned) : [];
  if (plans.length === 1) {
    const { partition: p, batch, sources } = plans[0]!;
    await planBatch(client, p.streamName, p.shard, p.fence, p.position, sources[0]!.seq, batch.end, batch.replacing);
  } else if (plans.length > 1) {
    await planBatches(client, plans.map(({ partition: p, batch, sources }) => ({ stream: p.streamName, shard: p.shard, fence: p.fence, position: p.position, first: sources[0]!.seq, end: batch.end, replacing: batch.replacing })));
  }
  await beginBatch(client);
  await lockPositions(client, work.map(({ partition: p }) => ({ stream: p.streamName, shard: p.shard, fence: p.fence, position: p.position })));
}

/**
 * Records the batch's uuids, failed events' too (they count as processed: a copy sent again is a
 * duplicate); returns the events and the failed ones seen neither before nor earlier in the batch.
 */
async function dedup(
  client: pg.ClientBase,
  work: readonly UnitWork[],
  live: readonly BatchEvent[],
  failedEvents: readonly BatchEvent[],
  generation: number,
): Promise<{ events: BatchEvent[]; failed: BatchEvent[]; duplicates: number }> {
  const firstSeen = new Map<string, BatchEvent>();
  for (const e of live) if (!firstSeen.has(e.key)) firstSeen.set(e.key, e);
  for (const e of failedEvents) if (!firstSeen.has(e.key)) firstSeen.set(e.key, e);
  const unique = [...firstSeen.values()];
  const projectIds = unique.map((e) => e.projectId);
  const uuids = unique.map((e) => e.event.uuid);
  let seenBefore = new Set<string>();
  let duplicatesLikely = work.some((w) => w.partition.duplicatesLikely);
  if (!duplicatesLikely && !(await recordNewEvents(client, generation, projectIds, uuids))) {
    // Some were seen before: undo the insert (only the position locks precede it) and ask which.
    await client.query('ROLLBACK');
    await beginBatch(client);
    await lockPositions(client, work.map(({ partition: p }) => ({ stream: p.streamName, shard: p.shard, fence: p.fence, position: p.position })));
    duplicatesLikely = true;
  }
  if (duplicatesLikely) {
    seenBefore = await recordEvents(client, generation, projectIds, uuids);
    // Back to the cheap path once a batch has none.
    for (const w of work) w.partition.duplicatesLikely = seenBefore.size > 0;
  }
  const fresh = (e: BatchEvent) => !seenBefore.has(e.key) && firstSeen.get(e.key) === e;
  const events = live.filter(fresh);
  const failed = failedEvents.filter(fresh);
  return { events, failed, duplicates: live.length + failedEvents.length - events.length - failed.length };
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
  const result = processEvents(events, workspace, (p, t) => ctx.groupTypes.indexOf(p, t), { maxPropertiesBytes: ctx.limits.maxPropertiesBytes });
  return { result, writes: workspace.writes() };
}

/** An `event_processing_failed` warning per failed event (counted once: duplicates are not reported again). */
function failedWarnings(failed: readonly BatchEvent[], work: readonly UnitWork[], unitOf: ReadonlyMap<BatchEvent, number>): IngestionWarning[] {
  return failed.map((e) => {
    const { batch, sources } = work[unitOf.get(e)!]!;
    return {
      projectId: e.projectId,
      type: 'event_processing_failed',
      details: { eventUuid: e.event.uuid, event: e.event.event, distinctId: e.event.distinct_id, seq: sources[e.message]!.seq, reason: batch.failed.get(e.key) },
    };
  });
}

/** Locks the persons the batch changes (checking their versions), then writes every change and the new positions. */
async function write(
  client: pg.ClientBase,
  work: readonly UnitWork[],
  { writes }: Computed,
  warnings: readonly IngestionWarning[],
  nextPlannedEnds: readonly (number | undefined)[],
): Promise<void> {
  const expected = new Map<string, number>();
  for (const u of writes.updates) expected.set(u.state.uuid, u.expectedVersion);
  for (const d of writes.deletes) expected.set(d.uuid, d.expectedVersion);
  await lockPersons(client, expected);
  await writeBatch(
    client,
    writes,
    warnings,
    work.map(({ partition, batch }, u) => ({
      stream: partition.streamName,
      shard: partition.shard,
      fence: partition.fence,
      position: batch.end,
      nextPlannedEnd: nextPlannedEnds[u],
    })),
  );
}

/**
 * The PROCESSED messages of each partition's batch, in parts whose ids depend only on the source
 * sequences they cover (never on which other batches shared the transaction). Every one must fit
 * a NATS message: a line that cannot is found before anything is published (a publish that fails
 * part way would leave a replay to publish the rest).
 */
function outputs(ctx: PartitionContext, work: readonly UnitWork[], unitOf: ReadonlyMap<BatchEvent, number>, events: readonly BatchEvent[], result: ProcessResult): OutputPart[] {
  const lines: OutputLine[][][] = work.map((w) => w.sources.map(() => []));
  // A loop, not a callback made per batch: its optimised code would not outlive a major GC (batch-codec.ts).
  for (let i = 0; i < events.length; i++) {
    const out = result.outputs[i];
    if (!out) continue;
    const e = events[i]!;
    const u = unitOf.get(e)!;
    lines[u]![e.message]!.push(processedLine(out, work[u]!.parsed.bodies[e.message], e, result.untouched[i]!));
  }
  const maxPayload = ctx.maxPayload();
  const parts = work.flatMap(({ partition, sources, parsed }, u) =>
    packOutputs(partition.streamName, partition.shard, sources, parsed.projects, lines[u]!, ctx.limits.publishPartBytes, maxPayload),
  );
  const tooLarge = parts.find((p) => p.body.length > bodyRoom(maxPayload, p.msgId));
  if (tooLarge) throw new OutputTooLargeError(`PROCESSED message ${tooLarge.msgId} of ${tooLarge.body.length} bytes does not fit the server's ${maxPayload}`);
  return parts;
}

/**
 * Publishes the parts to PROCESSED. Groups are written (outside the transaction, see
 * group-writer.ts) at the same time; both are done before COMMIT, so a replay repeats them.
 * Returns when it was acknowledged, and the groups whose update the size cap refused.
 */
async function publish(ctx: PartitionContext, parts: readonly OutputPart[], result: ProcessResult): Promise<{ publishedAt: number; refusedGroups: ProcessResult['groups'] }> {
  const [acks, refusedGroups] = await Promise.all([
    Promise.all(
      parts.map((p) => {
        const h = headers();
        h.set(HEADER_EVENT_COUNT, String(p.events));
        return ctx.js.publish(p.subject, p.body, { msgID: p.msgId, headers: h, timeout: 10_000 });
      }),
    ),
    ctx.groupWriter.write(result.groups),
  ]);
  const publishedAt = Date.now();
  const duplicated = acks.filter((a) => a.duplicate).length;
  if (duplicated > 0) ctx.metrics.publishDuplicates.inc(duplicated);
  return { publishedAt, refusedGroups };
}

function refusedGroupWarnings(groups: ProcessResult['groups'], maxBytes: number): IngestionWarning[] {
  return groups.map((g) => ({
    projectId: g.projectId,
    type: 'group_properties_too_large',
    details: { groupTypeIndex: g.groupTypeIndex, groupKey: g.groupKey, maxBytes },
  }));
}

function checkLeases(work: readonly UnitWork[]): void {
  if (!work.every((w) => w.partition.leaseValid())) throw new OwnershipLostError('lease lapsed before commit');
}

async function commit(client: pg.ClientBase, work: readonly UnitWork[]): Promise<void> {
  checkLeases(work);
  await client.query('COMMIT');
}

function recordMetrics(
  ctx: PartitionContext,
  b: {
    work: readonly UnitWork[];
    /** Per unit, events left out as failing. */
    failed: readonly number[];
    duplicates: number;
    computed: Computed;
    warnings: readonly IngestionWarning[];
    loaded: LoadedPersons;
    publishedAt: number;
    phases: PhaseClock;
  },
): void {
  const { metrics } = ctx;
  const seconds = b.phases.totalMs() / 1000;
  b.work.forEach((w, u) => {
    const stream = w.partition.streamName;
    for (const s of w.sources) metrics.processingLatency.observe({ stream }, Math.max(0, b.publishedAt - s.storedAtMs) / 1000);
    metrics.batchDuration.observe({ stream }, seconds);
    metrics.batchEvents.observe(w.parsedEvents);
    // Dropped by a hook (a transformation returned null).
    if (w.droppedByHooks > 0) metrics.eventsProcessed.inc({ kind: 'dropped' }, w.droppedByHooks);
    if (b.failed[u]! > 0) metrics.eventsProcessed.inc({ kind: 'failed' }, b.failed[u]);
    if (w.parsed.malformed > 0) metrics.eventsProcessed.inc({ kind: 'malformed' }, w.parsed.malformed);
  });
  metrics.transactionBatches.observe(b.work.length);
  for (const [name, ms] of b.phases.list) metrics.batchPhase.observe({ phase: name }, ms / 1000);
  for (const [kind, n] of b.computed.result.kinds) metrics.eventsProcessed.inc({ kind }, n);
  if (b.duplicates > 0) metrics.eventsProcessed.inc({ kind: 'duplicate' }, b.duplicates);
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
