// Processes one (stream, shard) in strict stream order, exactly once in effect:
//   take over (raise the fence, read the committed position) → ordered consumer from position + 1 →
//   per batch: plan its end (durable) → BEGIN → lock position row → dedup uuids → load persons →
//   compute in memory → lock changed persons → write everything → publish to PROCESSED with ids
//   derived from source sequences → COMMIT.
// A crash after publishing and before COMMIT replays the planned batch exactly: same ids, and
// JetStream drops the copies inside its duplicate window.
import { setTimeout as sleep } from 'node:timers/promises';
import type { JetStreamClient, JetStreamManager, JsMsg, MsgRequest } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { LimitFunction } from 'p-limit';
import type pg from 'pg';
import { HEADER_EVENT_COUNT, STREAMS, shardFilter, type Logger, type StreamKind } from '../../lib/index.js';
import {
  beginBatch,
  errorText,
  isConflictDbError,
  isNatsUnavailable,
  isTransientDbError,
  lockPosition,
  OwnershipLostError,
  planBatch,
  PositionMovedError,
  takeOverPartition,
} from '../coordination/index.js';
import { packOutputs, parseMessages, processedLine, type OutputLine, type SourceMessage } from './batch-codec.js';
import { recordEvents, recordNewEvents, type DedupGenerations } from './dedup.js';
import type { GroupTypeRegistry } from './group-types.js';
import type { GroupWriter } from './group-writer.js';
import { MessageFeed } from './message-feed.js';
import type { PersonMetrics } from './metrics.js';
import type { PersonCache } from './person-cache.js';
import { loadPersons, lockPersons, PersonConflictError, writeBatch } from './person-store.js';
import { PersonWorkspace } from './person-workspace.js';
import { distinctIdsToLoad, groupTypesOf, processEvents } from './process-events.js';

export interface BatchLimits {
  maxEvents: number;
  maxBytes: number;
  fetchMaxBytes: number;
  publishPartBytes: number;
}

/** Test hooks: let a test crash a worker at the worst moment. */
export interface WorkerFaults {
  /** Runs after a batch is published and before it commits. */
  afterPublish?: (info: { stream: string; shard: number; first: number; last: number }) => Promise<void> | void;
}

export interface PartitionContext {
  js: JetStreamClient;
  jsm: JetStreamManager;
  pool: pg.Pool;
  cache: PersonCache;
  groupTypes: GroupTypeRegistry;
  groupWriter: GroupWriter;
  dedup: DedupGenerations;
  metrics: PersonMetrics;
  logger: Logger;
  workerId: string;
  limits: BatchLimits;
  /**
   * Turns for batches, shared by all of a worker's partitions (WORKER_BATCH_CONCURRENCY): only
   * batches with a turn are taken from their shard's buffer and parsed, so few batches' events are
   * in memory at once.
   */
  batchSlots: LimitFunction;
  maxPayload: () => number;
  faults?: WorkerFaults;
}

class StoppedError extends Error {
  override name = 'StoppedError';
}

/** Messages processed and committed together. */
interface Batch {
  messages: JsMsg[];
  /** The position once committed (past the last message when planned messages expired). */
  end: number;
  /** Its end was recorded before it was taken (and it may have been published): process exactly it. */
  planned: boolean;
  /** The own, unused plan this batch outgrew: its end is recorded in its place. */
  replacing?: number;
}

/** A message is in the stream that the shard's consumer never delivered: open a new one. */
class FeedStalledError extends Error {
  override name = 'FeedStalledError';
}

/** How long a feed may stay quiet before the stream is asked whether it holds more for the shard. */
const STALL_PROBE_MS = 5_000;
/** Largest message expected at first (ingest's and the workers' default message size). */
const EXPECTED_MESSAGE_BYTES = 1024 * 1024;

export class PartitionProcessor {
  readonly streamName: string;
  private stopping = false;
  private running: Promise<void> | undefined;
  private readonly wakeSleep = new AbortController();
  private fence = 0;
  private position = 0;
  /** End of the next batch as recorded in Postgres (pending_end), if any. */
  private planned: number | undefined;
  /**
   * The plan was made by this owner's last commit, so nothing has been published under it yet: when
   * more has arrived by the batch's turn, the batch may grow past it. A plan found at take-over may
   * have been published already and is replayed exactly.
   */
  private planIsOwnAndUnused = false;
  private feed: MessageFeed | undefined;
  private readonly log: Logger;
  /** Room each pull keeps for one message; grows when a bigger one is found stuck. */
  private messageMaxBytes = EXPECTED_MESSAGE_BYTES;
  private lastProbeAt = 0;
  /** The last batch had duplicates: go straight to the dedup query that says which, not the cheap one. */
  private duplicatesLikely = false;
  private untrack: (() => void) | undefined;

  constructor(
    readonly kind: StreamKind,
    readonly shard: number,
    private readonly ctx: PartitionContext,
    /** False once this worker may no longer act for the shard (lease lapsed locally). */
    private readonly leaseValid: () => boolean,
    private readonly onLost: (reason: string) => void,
  ) {
    this.streamName = STREAMS[kind];
    this.log = ctx.logger.child({ stream: this.streamName, shard });
  }

  start(): void {
    this.untrack ??= this.ctx.metrics.trackPartition(() => ({
      stream: this.streamName,
      shard: this.shard,
      position: this.position,
      lag: this.feed?.lag(),
    }));
    this.running ??= this.run().finally(() => this.untrack?.());
  }

  /** Stops fetching, lets the batch in flight commit (or give up if it cannot), and returns. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeSleep.abort();
    // An idle shard waits up to a second for messages: a shard handed over must not wait that out.
    this.feed?.interrupt();
    await this.running;
  }

  private async pause(ms: number): Promise<void> {
    if (this.stopping || ms <= 0) return;
    await sleep(ms, undefined, { signal: this.wakeSleep.signal }).catch(() => undefined);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let feed: MessageFeed | undefined;
      try {
        if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed');
        const info = await this.ctx.jsm.streams.info(this.streamName);
        const start = await takeOverPartition(this.ctx.pool, this.streamName, this.shard, this.ctx.workerId, info.created);
        if (start.reset) this.log.warn('stream was re-created since the stored position: starting again from its beginning');
        this.fence = start.fence;
        this.position = start.position;
        this.planned = start.pendingEnd !== undefined && start.pendingEnd > this.position ? start.pendingEnd : undefined;
        this.planIsOwnAndUnused = false;
        const limits = this.ctx.limits;
        feed = new MessageFeed(this.ctx.js, {
          stream: this.streamName,
          filterSubject: shardFilter(this.kind, this.shard),
          startSeq: this.position + 1,
          fetchMaxBytes: limits.fetchMaxBytes,
          messageMaxBytes: this.messageMaxBytes,
          // Room for a whole planned batch plus what the consumer has in flight.
          bufferMaxBytes: limits.maxBytes + limits.fetchMaxBytes + this.messageMaxBytes,
          onResume: () => this.ctx.metrics.feedResumes.inc({ stream: this.streamName }),
        });
        await feed.open();
        this.feed = feed;
        this.log.debug({ position: this.position, fence: this.fence, planned: this.planned }, 'partition started');
        while (!this.stopping) {
          if (!(await this.batchReady(feed))) {
            if (feed.ended) throw feed.error instanceof Error ? feed.error : new Error(`consumer ended: ${String(feed.error)}`);
            await this.probeForStall(feed);
            continue;
          }
          await this.processWithRetry(feed);
          failures = 0;
        }
      } catch (err) {
        if (err instanceof OwnershipLostError) {
          this.log.warn({ reason: err.message }, 'partition ownership lost: stopping it');
          this.onLost(err.message);
          return;
        }
        if (this.stopping || err instanceof StoppedError) break;
        if (err instanceof FeedStalledError) {
          this.ctx.metrics.feedRestarts.inc({ stream: this.streamName });
          this.log.warn({ reason: err.message, position: this.position }, 'shard consumer stalled: opening a new one from the committed position');
          continue;
        }
        failures++;
        this.ctx.metrics.batchRetries.inc({ reason: isTransientDbError(err) ? 'unavailable' : 'error' });
        this.log.warn({ err: errorText(err), failures }, 'partition failed: restarting it from the committed position');
        await this.pause(Math.min(5_000, 100 * 2 ** Math.min(failures, 6)));
      } finally {
        await feed?.close();
        this.feed = undefined;
      }
    }
  }

  /**
   * After STALL_PROBE_MS without a message, asks the stream for the shard's next message after the
   * last one received; if there is one, the consumer lost it (or cannot deliver it) and must be
   * replaced (FeedStalledError). Idle shards cost one lookup per STALL_PROBE_MS.
   */
  private async probeForStall(feed: MessageFeed): Promise<void> {
    const now = performance.now();
    if (now - feed.lastReceivedAt < STALL_PROBE_MS || now - this.lastProbeAt < STALL_PROBE_MS) return;
    this.lastProbeAt = now;
    let next: Awaited<ReturnType<JetStreamManager['streams']['getMessage']>>;
    try {
      // The server's MSG.GET takes next_by_subj (a wildcard too) since 2.9; nats.js types it only for direct gets.
      const query = { seq: feed.lastSeq + 1, next_by_subj: shardFilter(this.kind, this.shard) } as unknown as MsgRequest;
      next = await this.ctx.jsm.streams.getMessage(this.streamName, query);
    } catch (err) {
      // NATS unreachable: the consumer is waiting it out too; probe again later.
      this.log.debug({ err: errorText(err) }, 'stall probe failed');
      return;
    }
    // A message stored moments ago may simply not have been delivered yet (a pull being renewed):
    // only one that has waited as long as the feed has been quiet counts as lost.
    if (!next || performance.now() - feed.lastReceivedAt < STALL_PROBE_MS || Date.now() - next.time.getTime() < STALL_PROBE_MS) return;
    // Room in every pull for this message, headers and all.
    this.messageMaxBytes = Math.min(Math.max(this.messageMaxBytes, next.data.length + 16 * 1024), this.ctx.maxPayload());
    throw new FeedStalledError(`message ${next.seq} (${next.data.length} bytes) is in the stream but never arrived`);
  }

  /**
   * Waits until a batch can be taken (false: nothing yet). A batch planned before a crash is
   * replayed exactly: it waits until the feed reaches the planned end, or shows nothing more
   * exists up to it.
   */
  private async batchReady(feed: MessageFeed): Promise<boolean> {
    await feed.waitForMessages(1_000);
    const last = feed.peekLast();
    if (this.stopping || !last) return false;
    const pendingEnd = this.planned;
    if (pendingEnd !== undefined && pendingEnd > this.position && last.seq < pendingEnd && last.info.pending > 0) {
      // The planned batch may be bigger than the buffer (limits lowered since it was planned).
      feed.fillThrough(pendingEnd);
      await sleep(20);
      return false;
    }
    return true;
  }

  /**
   * The batch, taken when it has its turn. A planned batch (it may have been published already) is
   * exactly its messages, so it gets the same PROCESSED ids; under load every batch is planned by
   * the commit before it. Otherwise, whatever is buffered by then, within limits.
   *
   * A plan this owner made itself is only a floor: if more arrived while the batch waited for its
   * turn and the limits have room, the batch takes that too and records its new end first (one
   * more round trip). Without that, at moderate load every event waited for two batches of its
   * shard, one to be planned and one to be processed.
   */
  private takeBatch(feed: MessageFeed): Batch | undefined {
    const limits = this.ctx.limits;
    const pendingEnd = this.planned;
    const canGrow = pendingEnd !== undefined && this.planIsOwnAndUnused && (feed.peekEnd(limits) ?? 0) > pendingEnd;
    if (pendingEnd === undefined || pendingEnd <= this.position || canGrow) {
      const messages = feed.take({ maxEvents: limits.maxEvents, maxBytes: limits.maxBytes });
      if (messages.length === 0) return undefined;
      return { messages, end: messages[messages.length - 1]!.seq, planned: false, replacing: canGrow ? pendingEnd : undefined };
    }
    const messages = feed.take({ maxEvents: Number.MAX_SAFE_INTEGER, maxBytes: Number.MAX_SAFE_INTEGER, untilSeq: pendingEnd });
    if (messages.length === 0) {
      // Everything planned is gone from the stream (expired): nothing of it can be replayed.
      this.planned = undefined;
      return undefined;
    }
    // Messages missing up to the planned end no longer exist (expired): the batch covers them too.
    return { messages, end: pendingEnd, planned: true };
  }

  /**
   * Runs `work` when this shard's batch has its turn (WORKER_BATCH_CONCURRENCY). A shard stopped
   * (handed over, shutting down) before the turn comes stops waiting at once: the batch is not
   * started, and the next owner processes it from the committed position (a planned one exactly
   * as planned). Work that has started is waited for.
   */
  private async inTurn(work: () => Promise<void>): Promise<void> {
    let started = false;
    const turn = this.ctx.batchSlots(async () => {
      started = true;
      if (this.stopping) throw new StoppedError('stopped before the batch had its turn: it will be processed later');
      await work();
    });
    if (!started) {
      // Behind other shards' batches: wait for the turn or for this shard to stop, whichever is first.
      const signal = this.wakeSleep.signal;
      let onStop!: () => void;
      const stopped = new Promise<void>((resolve) => (onStop = resolve));
      if (signal.aborted) onStop();
      else signal.addEventListener('abort', onStop, { once: true });
      try {
        await Promise.race([turn, stopped]);
      } finally {
        signal.removeEventListener('abort', onStop);
      }
      if (!started) {
        // The turn, when it comes, ends at once (stopping): nothing waits for it any more.
        turn.catch(() => undefined);
        throw new StoppedError('stopped while the batch waited for its turn: it will be processed later');
      }
    }
    await turn;
  }

  /** Takes the batch from `feed` at its first turn and processes it until it commits; the same messages on every attempt. */
  private async processWithRetry(feed: MessageFeed): Promise<void> {
    let batch: Batch | undefined;
    for (let attempt = 0; ; attempt++) {
      if (this.stopping && attempt > 0) throw new StoppedError('stopping with a batch not committed: it will be replayed');
      if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed before the batch committed');
      try {
        // A turn per attempt: a batch pausing between attempts leaves its turn to other shards.
        await this.inTurn(async () => {
          if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed while the batch waited for its turn');
          batch ??= this.takeBatch(feed);
          if (batch) await this.processOnce(batch);
        });
        return;
      } catch (err) {
        if (err instanceof OwnershipLostError || err instanceof PositionMovedError || err instanceof StoppedError) throw err;
        const conflict = err instanceof PersonConflictError || isConflictDbError(err);
        const reason = conflict ? 'conflict' : isTransientDbError(err) || isNatsUnavailable(err) ? 'unavailable' : 'error';
        this.ctx.metrics.batchRetries.inc({ reason });
        const level = conflict && attempt < 3 ? 'debug' : 'warn';
        this.log[level]({ err: errorText(err), attempt, reason, first: batch?.messages[0]?.seq, last: batch?.end }, 'batch failed: retrying');
        await this.pause(conflict ? (attempt < 3 ? 0 : Math.min(1_000, 20 * 2 ** attempt)) : Math.min(5_000, 100 * 2 ** Math.min(attempt, 6)));
      }
    }
  }

  private async processOnce({ messages, end, planned, replacing }: Batch): Promise<void> {
    const { pool, cache, groupTypes, dedup, metrics, limits } = this.ctx;
    const started = performance.now();
    let mark = started;
    const phases: [string, number][] = [];
    const phase = (name: string) => {
      const now = performance.now();
      phases.push([name, now - mark]);
      mark = now;
    };
    const sources: SourceMessage[] = messages.map((m) => ({
      seq: m.seq,
      subject: m.subject,
      data: m.data,
      storedAtMs: Math.floor(m.info.timestampNanos / 1e6),
    }));
    // Parsed afresh on every attempt: processing changes events in place.
    const parsed = parseMessages(this.kind, sources);
    const wantedTypes: [number, string][] = [];
    for (const e of parsed.events) for (const t of groupTypesOf(e)) wantedTypes.push([e.projectId, t]);
    await groupTypes.ensure(pool, wantedTypes);
    const generation = dedup.current();
    await dedup.ensure(pool, generation);
    phase('prepare');

    const client = await pool.connect();
    phase('connect');
    let broken = false;
    let committed:
      | {
          writes: ReturnType<PersonWorkspace['writes']>;
          result: ReturnType<typeof processEvents>;
          warnings: { type: string }[];
          duplicates: number;
          loaded: { cacheHits: number; cacheMisses: number };
          published: number;
          nextPlannedEnd: number | undefined;
        }
      | undefined;
    try {
      // The end must be durable before anything of the batch is published. Under load it was
      // planned by the previous batch's commit; otherwise it is written now, ahead of the transaction.
      if (!planned) await planBatch(client, this.streamName, this.shard, this.fence, this.position, messages[0]!.seq, end, replacing);
      await beginBatch(client);
      await lockPosition(client, this.streamName, this.shard, this.fence, this.position);
      phase('lock');

      const firstSeen = new Map<string, (typeof parsed.events)[number]>();
      for (const e of parsed.events) if (!firstSeen.has(e.key)) firstSeen.set(e.key, e);
      const unique = [...firstSeen.values()];
      const projectIds = unique.map((e) => e.projectId);
      const uuids = unique.map((e) => e.event.uuid);
      let seenBefore = new Set<string>();
      if (!this.duplicatesLikely && !(await recordNewEvents(client, generation, projectIds, uuids))) {
        // Some were seen before: undo the insert (only the position lock precedes it) and ask which.
        await client.query('ROLLBACK');
        await beginBatch(client);
        await lockPosition(client, this.streamName, this.shard, this.fence, this.position);
        this.duplicatesLikely = true;
      }
      if (this.duplicatesLikely) {
        seenBefore = await recordEvents(client, generation, projectIds, uuids);
        // Back to the cheap path once a batch has none.
        this.duplicatesLikely = seenBefore.size > 0;
      }
      const events = parsed.events.filter((e) => !seenBefore.has(e.key) && firstSeen.get(e.key) === e);
      phase('dedup');
      const duplicates = parsed.events.length - events.length;

      const keys: [number, string][] = [];
      for (const e of events) for (const id of distinctIdsToLoad(e)) keys.push([e.projectId, id]);
      const loaded = await loadPersons(client, keys, cache);
      phase('load');
      const workspace = new PersonWorkspace(loaded.lookups, loaded.persons);
      const result = processEvents(events, workspace, (p, t) => groupTypes.indexOf(p, t));
      const writes = workspace.writes();
      phase('compute');
      const expected = new Map<string, number>();
      for (const u of writes.updates) expected.set(u.state.uuid, u.expectedVersion);
      for (const d of writes.deletes) expected.set(d.uuid, d.expectedVersion);
      await lockPersons(client, expected);
      const warnings = [...parsed.warnings, ...result.warnings];
      const nextPlannedEnd = this.feed?.peekEnd({ maxEvents: limits.maxEvents, maxBytes: limits.maxBytes });
      await writeBatch(client, writes, warnings, {
        stream: this.streamName,
        shard: this.shard,
        fence: this.fence,
        position: end,
        nextPlannedEnd,
      });
      phase('write');

      const lines: OutputLine[][] = sources.map(() => []);
      events.forEach((e, i) => {
        const out = result.outputs[i];
        if (out) lines[e.message]!.push(processedLine(out, parsed.bodies[e.message], e, result.untouched[i]!));
      });
      const parts = packOutputs(this.streamName, this.shard, sources, parsed.projects, lines, limits.publishPartBytes, this.ctx.maxPayload());
      // Groups are written (outside this transaction, see group-writer.ts) while the batch is published;
      // both are done before COMMIT, so a replay repeats them.
      const groupsWritten = this.ctx.groupWriter.write(result.groups);
      const [acks] = await Promise.all([
        Promise.all(
          parts.map((p) => {
            const h = headers();
            h.set(HEADER_EVENT_COUNT, String(p.events));
            return this.ctx.js.publish(p.subject, p.body, { msgID: p.msgId, headers: h, timeout: 10_000 });
          }),
        ),
        groupsWritten,
      ]);
      const published = Date.now();
      phase('publish');
      const duplicated = acks.filter((a) => a.duplicate).length;
      if (duplicated > 0) metrics.publishDuplicates.inc(duplicated);
      await this.ctx.faults?.afterPublish?.({ stream: this.streamName, shard: this.shard, first: sources[0]!.seq, last: end });
      if (!this.leaseValid()) throw new OwnershipLostError('lease lapsed before commit');
      await client.query('COMMIT');
      phase('commit');
      committed = { writes, result, warnings, duplicates, loaded, published, nextPlannedEnd };
    } catch (err) {
      broken = isTransientDbError(err);
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw err;
    } finally {
      client.release(broken);
    }

    this.position = end;
    this.planned = committed?.nextPlannedEnd;
    this.planIsOwnAndUnused = true;
    if (!committed) return;
    const { writes, result, warnings, duplicates, loaded, published } = committed;
    cache.applyCommitted(writes);
    for (const s of sources) metrics.processingLatency.observe({ stream: this.streamName }, Math.max(0, published - s.storedAtMs) / 1000);
    metrics.batchDuration.observe({ stream: this.streamName }, (performance.now() - started) / 1000);
    metrics.batchEvents.observe(parsed.events.length);
    for (const [name, ms] of phases) metrics.batchPhase.observe({ phase: name }, ms / 1000);
    for (const [kind, n] of result.kinds) metrics.eventsProcessed.inc({ kind }, n);
    if (duplicates > 0) metrics.eventsProcessed.inc({ kind: 'duplicate' }, duplicates);
    if (parsed.malformed > 0) metrics.eventsProcessed.inc({ kind: 'malformed' }, parsed.malformed);
    for (const w of warnings) metrics.warnings.inc({ type: w.type });
    metrics.personCache.inc({ result: 'hit' }, loaded.cacheHits);
    metrics.personCache.inc({ result: 'miss' }, loaded.cacheMisses);
  }
}
