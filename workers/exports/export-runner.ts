// One batch export, run by the worker holding its lease (`export.<id>`): its runs one at a time
// and in order — a run left unfinished (a crash, a lease that moved, a retry waiting), then the
// scheduled intervals that are due (catching up after downtime), then backfill runs, oldest
// first — each planned, delivered, committed and reported (docs/exports.md, "Runs").
import { setTimeout as sleep } from 'node:timers/promises';
import type { JetStreamClient } from '@nats-io/jetstream';
import type pg from 'pg';
import { exponentialBackoff, type BatchExportRecord, type Logger } from '../../lib/index.js';
import { errorText, OwnershipLostError, type Lease, type LeaseRunner } from '../coordination/index.js';
import { watchBackfillRequests } from './backfill-requests.js';
import type { CaptureProgress, ShardBehind } from './capture-progress.js';
import type { ExportCatalog } from './catalog.js';
import { createDestination, type Destination, type DestinationWriter, type RunTarget } from './destinations/index.js';
import type { EgressPolicy } from './egress.js';
import { asExportError, ExportError, RunStopped } from './errors.js';
import type { EventLines } from './formats/event-lines.js';
import type { LinePool } from './formats/line-pool.js';
import type { ExportMetrics } from './metrics.js';
import { readPersons } from './persons-reader.js';
import { keeps, planBackfill, planScheduled, type ExportClock, type RunPlan } from './plan.js';
import type { ProcessedStream } from './processed-stream.js';
import { eventFilter, exportRecordOf, processedLines, pythonIso, type ExportRecord } from './records.js';
import { RunReporter, runIdOf, type LogLevel } from './reports.js';
import { RunStore, type ScheduleState, type StoredRun } from './run-store.js';
import { alignedStart, dueAt, intervalMs, withinBounds } from './schedule.js';

/** PROCESSED messages a JSONLines run has in the formatting threads at once (their bytes and text count in its memory). */
const LINES_AHEAD = 4;

export interface ExportSettings {
  graceMs: number;
  retryBackoffMs: number;
  retryMaxBackoffMs: number;
  retryAttempts: number;
  /** Pause an export after `failures` of its last `of` scheduled runs Failed (0: never). */
  autoPause: { failures: number; of: number };
  backfillSkewMs: number;
  /** How long a backfill run waits in one attempt for the workers to process what was captured before it. */
  backfillCatchUpMs: number;
  /** Longest idle wait between looks at the export (pause, new backfills). */
  pollMs: number;
  httpRetryBaseMs?: number;
}

export interface ExportRunnerDeps {
  db: pg.Pool;
  js: JetStreamClient;
  stream: ProcessedStream;
  /** Where the persons workers stand on the capture streams (a backfill run waits for them). */
  progress: CaptureProgress;
  catalog: ExportCatalog;
  clock: ExportClock;
  egress: EgressPolicy;
  settings: ExportSettings;
  metrics: ExportMetrics;
  logger: Logger;
  workerId: string;
  instanceId: string;
  /** The destination's config as the runner may use it (secrets decrypted). */
  destinationConfig(record: BatchExportRecord): Record<string, unknown>;
  /** End of the last completed scheduled interval per export (the lag metric). */
  lastCompletedEnd: Map<string, number>;
  faults?: ExportFaults;
  /** The role's formatting threads (EXPORT_FORMAT_THREADS), for writers of JSONLines. */
  lines: LinePool;
  /** Runs of all the exports a worker holds take turns (EXPORT_CONCURRENCY): memory is bounded per worker. */
  turns: <T>(work: () => Promise<T>) => Promise<T>;
}

/** Fault injection for process tests only. */
export interface ExportFaults {
  /** Called after each batch handed to a destination with the run's records so far. */
  afterWrite?(records: number): void;
}

type Job = { run: StoredRun } | { waitUntil: number };

export function startExportRunner(lease: Lease, lost: (reason: string) => void, deps: ExportRunnerDeps): LeaseRunner {
  const exportId = lease.name;
  const controller = new AbortController();
  let wake: (() => void) | undefined;
  const poke = () => wake?.();
  const unsubscribe = deps.catalog.onChange((id) => id === exportId && poke());
  const runner = new ExportLoop(exportId, deps, controller.signal, (f) => (wake = f), poke);
  const done = runner.run().catch((err: unknown) => {
    if (err instanceof OwnershipLostError) lost(err.message);
    else if (!controller.signal.aborted) {
      deps.logger.error({ exportId, err: errorText(err) }, 'export runner failed: the lease is given up so another worker tries');
      lost(errorText(err));
    }
  });
  return {
    stop: async () => {
      const deleted = deps.catalog.get(exportId) === undefined;
      controller.abort(new RunStopped(deleted ? 'deleted' : 'lease_lost'));
      poke();
      await done;
      unsubscribe();
      if (deleted) await runner.cancelAll().catch((err: unknown) => deps.logger.warn({ exportId, err: errorText(err) }, 'could not record the cancelled runs'));
    },
  };
}

class ExportLoop {
  private store: RunStore;
  private schedule: ScheduleState | undefined;
  private reporter: RunReporter | undefined;

  constructor(
    private readonly exportId: string,
    private readonly deps: ExportRunnerDeps,
    private readonly signal: AbortSignal,
    private readonly setWake: (wake: (() => void) | undefined) => void,
    private readonly poke: () => void,
  ) {
    this.store = new RunStore(deps.db, exportId);
  }

  private get record(): BatchExportRecord | undefined {
    return this.deps.catalog.get(this.exportId);
  }

  async run(): Promise<void> {
    const first = this.record;
    if (!first) return;
    const { clock } = this.deps;
    this.reporter = new RunReporter(this.deps.js, first.team_id, this.exportId, this.deps.instanceId);
    this.schedule = await this.store.takeOver(first.team_id, this.deps.workerId, alignedStart(clock.now(), first.interval));
    const backfills = watchBackfillRequests(this.deps.js, this.store, first.team_id, this.deps.logger, this.poke);
    try {
      while (!this.signal.aborted) {
        const record = this.record;
        if (!record) return;
        const job = await this.nextJob(record);
        if ('run' in job) await this.deps.turns(() => (this.signal.aborted ? Promise.resolve() : this.execute(job.run)));
        else await this.sleepUntil(job.waitUntil);
      }
    } finally {
      await backfills.stop();
    }
  }

  private sleepUntil(t: number): Promise<void> {
    const ms = Math.max(10, Math.min(t - this.deps.clock.now(), this.deps.settings.pollMs));
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.setWake(done);
      if (this.signal.aborted) done();
    });
  }

  private async nextJob(record: BatchExportRecord): Promise<Job> {
    const now = this.deps.clock.now();
    const unfinished = await this.store.unfinishedRun();
    if (unfinished) {
      if (unfinished.status === 'FailedRetryable' && (unfinished.nextAttemptAt ?? 0) > now) return { waitUntil: unfinished.nextAttemptAt! };
      return { run: unfinished };
    }
    const scheduled = await this.nextScheduled(record, now);
    if (scheduled) return scheduled;
    const backfill = (await this.store.pendingBackfills())[0];
    if (backfill) {
      const step = backfill.intervalSeconds * 1000;
      const start = backfill.startAt + backfill.runsCreated * step;
      const end = Math.min(start + step, backfill.endAt);
      const run = await this.store.createRun({ id: runIdOf(this.exportId, backfill.id, start, end), backfillId: backfill.id, start, end });
      return { run };
    }
    const schedule = this.schedule!;
    return { waitUntil: dueAt(schedule.nextStart + intervalMs(record.interval), this.deps.settings.graceMs) };
  }

  /** The next scheduled run due, after moving past intervals that are skipped (paused, outside start_at/end_at). */
  private async nextScheduled(record: BatchExportRecord, now: number): Promise<Job | undefined> {
    const schedule = this.schedule!;
    const length = intervalMs(record.interval);
    // An interval changed since: go on from the next start aligned to the new one.
    if (alignedStart(schedule.nextStart, record.interval) !== schedule.nextStart) {
      schedule.nextStart = alignedStart(schedule.nextStart, record.interval) + length;
      await this.store.skipTo(schedule.nextStart);
    }
    let next = schedule.nextStart;
    while (dueAt(next + length, this.deps.settings.graceMs) <= now && (record.paused || !withinBounds(next + length, record))) next += length;
    if (next !== schedule.nextStart) {
      await this.log('INFO', `Skipped ${(next - schedule.nextStart) / length} interval(s) from ${pythonIso(new Date(schedule.nextStart))} (${record.paused ? 'paused' : 'outside start_at/end_at'})`);
      schedule.nextStart = next;
      await this.store.skipTo(next);
    }
    if (dueAt(next + length, this.deps.settings.graceMs) > now) return undefined;
    const run = await this.store.createRun({ id: runIdOf(this.exportId, null, next, next + length), backfillId: null, start: next, end: next + length }, next + length);
    schedule.nextStart = next + length;
    await this.report(run, 'Starting');
    return { run };
  }

  private async report(run: StoredRun, status: StoredRun['status'], extra: { records?: number; error?: string | null; cursor?: string; pause?: string } = {}): Promise<void> {
    await this.reporter!.run({
      backfill_id: run.backfillId,
      data_interval_start: new Date(run.start).toISOString(),
      data_interval_end: new Date(run.end).toISOString(),
      status,
      ...(extra.records !== undefined ? { records_completed: extra.records } : {}),
      ...(extra.error !== undefined ? { latest_error: extra.error } : {}),
      ...(extra.cursor !== undefined ? { cursor: extra.cursor } : {}),
      ...(extra.pause !== undefined ? { pause_export: extra.pause } : {}),
      updated_at: new Date().toISOString(),
    });
  }

  private async log(level: LogLevel, message: string, run?: StoredRun): Promise<void> {
    const prefix = run ? `[${pythonIso(new Date(run.start))}, ${pythonIso(new Date(run.end))})${run.backfillId ? ` backfill ${run.backfillId}` : ''}: ` : '';
    await this.reporter!.log(level, prefix + message, run?.id).catch((err: unknown) => this.deps.logger.warn({ exportId: this.exportId, err: errorText(err) }, 'could not publish an export log entry'));
  }

  private async plan(run: StoredRun, record: BatchExportRecord): Promise<RunPlan> {
    if (run.plan) return run.plan;
    const { stream, clock, settings } = this.deps;
    if (run.backfillId !== null) await this.waitForCapture(run, record.team_id);
    let plan: RunPlan;
    if (record.model === 'persons') {
      plan = run.backfillId === null ? { kind: 'persons', fromMs: clock.toReal(run.start), toMs: clock.toReal(run.end) } : { kind: 'persons', fromMs: null, toMs: run.end };
    } else if (run.backfillId === null) {
      plan = await planScheduled(stream, this.store, record.team_id, run, this.schedule!, clock);
    } else {
      plan = await planBackfill(stream, this.store, record.team_id, run, settings.backfillSkewMs);
    }
    await this.store.savePlan(run, plan);
    if (run.backfillId === null && plan.kind === 'events') Object.assign(this.schedule!, { chainEnd: run.end, chainSeq: plan.lastSeq });
    run.plan = plan;
    return plan;
  }

  /**
   * A backfill run first waits until the workers have processed every message of the project
   * that the capture streams held when it started, so the events sent just before the backfill
   * are in it; past `backfillCatchUpMs` the attempt fails as retryable (FailedRetryable, tried
   * again after a back-off) rather than export without them.
   */
  private async waitForCapture(run: StoredRun, teamId: number): Promise<void> {
    const { progress, settings } = this.deps;
    const mark = await progress.mark();
    const deadline = performance.now() + settings.backfillCatchUpMs;
    let behind = await progress.behind(teamId, mark);
    if (behind.length === 0) return;
    await this.log('INFO', `Waiting for the workers to process the events captured before this run (${behindText(behind)})`, run);
    while (behind.length > 0) {
      if (performance.now() >= deadline) {
        throw new ExportError(
          'workers_behind',
          `the workers have not yet processed every event captured before this backfill run (${behindText(behind)}); it waits for them rather than export without those events`,
        );
      }
      await sleep(250, undefined, { signal: this.signal });
      behind = await progress.behind(teamId, mark);
    }
    await this.log('INFO', 'The workers have processed the events captured before this run', run);
  }

  private async execute(run: StoredRun): Promise<void> {
    const record = this.record;
    if (!record) return;
    const { metrics, settings } = this.deps;
    const type = record.destination.type;
    const attempt = await this.store.markRunning(run.id);
    await this.report(run, 'Running');
    const started = performance.now();
    let destination: Destination | undefined;
    try {
      const plan = await this.plan(run, record);
      const config = this.deps.destinationConfig(record);
      destination = createDestination(record, config, { egress: this.deps.egress, httpRetryBaseMs: settings.httpRetryBaseMs });
      await destination.check(this.signal);
      const target: RunTarget = { exportId: this.exportId, teamId: record.team_id, model: record.model, start: new Date(run.start), end: new Date(run.end), backfillId: run.backfillId, runId: run.id };
      const writer = await destination.open(target, this.signal);
      let read: { read: number; kept: number };
      try {
        read = await this.deliver(plan, record, config, writer);
      } catch (err) {
        await writer.abort(err).catch(() => undefined);
        throw err;
      }
      const delivered = await writer.commit();
      await this.store.finish(run.id, { status: 'Completed', records: delivered.records, bytes: delivered.bytes });
      const cursor = plan.kind === 'events' ? { first_seq: plan.firstSeq, last_seq: plan.lastSeq, bytes_exported: delivered.bytes } : { bytes_exported: delivered.bytes };
      await this.report(run, 'Completed', { records: delivered.records, cursor: JSON.stringify(cursor) });
      await this.log('INFO', `Completed: ${delivered.records} records, ${delivered.bytes} bytes (${delivered.detail}); read ${read.read} events${plan.kind === 'events' ? ` at PROCESSED sequences ${plan.firstSeq}..${plan.lastSeq}` : ''}`, run);
      metrics.runs.inc({ destination: type, status: 'Completed' });
      metrics.records.inc({ destination: type }, delivered.records);
      metrics.bytes.inc({ destination: type }, delivered.bytes);
      if (run.backfillId === null) this.deps.lastCompletedEnd.set(this.exportId, this.deps.clock.toReal(run.end));
    } catch (err) {
      if (this.signal.aborted || err instanceof OwnershipLostError) {
        // Stopped from outside: a run of a deleted export is cancelled by stop(); any other is left
        // for the lease's next holder, which resumes it from its stored plan.
        if (err instanceof OwnershipLostError) throw err;
        return;
      }
      const failure = asExportError(err);
      const message = failure.message.replace(/\u0000/g, '');
      if (failure.retryable && attempt < settings.retryAttempts) {
        const backoff = exponentialBackoff(settings.retryBackoffMs, attempt - 1, settings.retryMaxBackoffMs);
        await this.store.finish(run.id, { status: 'FailedRetryable', error: message, nextAttemptAt: this.deps.clock.now() + backoff });
        await this.report(run, 'FailedRetryable', { error: message });
        await this.log('WARNING', `Attempt ${attempt} failed (${failure.code}): ${message}; trying again in ${Math.round(backoff / 1000)} s`, run);
        metrics.runs.inc({ destination: type, status: 'FailedRetryable' });
      } else {
        await this.store.finish(run.id, { status: 'Failed', error: message });
        const pause = run.backfillId === null ? await this.pauseReason() : undefined;
        await this.report(run, 'Failed', { error: message, ...(pause ? { pause } : {}) });
        await this.log('ERROR', `Failed (${failure.code}${failure.retryable ? `, after ${attempt} attempts` : ''}): ${message}`, run);
        if (pause) await this.log('ERROR', `Pausing the export: ${pause}`);
        metrics.runs.inc({ destination: type, status: 'Failed' });
      }
    } finally {
      metrics.runSeconds.observe({ destination: type }, (performance.now() - started) / 1000);
      await destination?.close().catch(() => undefined);
    }
  }

  /** PostHog's rule: pause when `failures` of the last `of` scheduled runs failed. */
  private async pauseReason(): Promise<string | undefined> {
    const { failures, of } = this.deps.settings.autoPause;
    if (failures <= 0) return undefined;
    const statuses = await this.store.recentScheduledStatuses(of);
    const failed = statuses.filter((s) => s === 'Failed').length;
    return failed >= failures ? `${failed} of the last ${statuses.length} scheduled runs failed (limit ${failures} of ${of})` : undefined;
  }

  /** Reads what the plan covers and hands it to the writer; returns how many events were read and kept. */
  private async deliver(plan: RunPlan, record: BatchExportRecord, config: Record<string, unknown>, writer: DestinationWriter): Promise<{ read: number; kept: number }> {
    if (plan.kind === 'persons') {
      let kept = 0;
      for await (const page of readPersons(this.deps.db, record.team_id, plan.fromMs, plan.toMs, this.signal)) {
        kept += page.length;
        await writer.writePersons(page);
        this.deps.faults?.afterWrite?.(kept);
      }
      return { read: kept, kept };
    }
    if (writer.writeEventLines) return this.deliverLines(plan, record, config, writer.writeEventLines);
    const wanted = eventFilter(config);
    let read = 0;
    let kept = 0;
    let batch: ExportRecord[] = [];
    for await (const msg of this.deps.stream.read(record.team_id, plan.firstSeq, plan.lastSeq, this.signal)) {
      for (const line of processedLines(msg.data)) {
        const r = exportRecordOf(line, msg.timeUs, msg.seq);
        if (!r) continue;
        read++;
        if (keeps(plan, r) && wanted(r.event)) batch.push(r);
      }
      if (batch.length >= 1_000) {
        kept += batch.length;
        await writer.writeEvents(batch);
        this.deps.faults?.afterWrite?.(kept);
        batch = [];
      }
    }
    if (batch.length > 0) {
      kept += batch.length;
      await writer.writeEvents(batch);
    }
    this.signal.throwIfAborted();
    return { read, kept };
  }

  /**
   * The same for a writer of JSONLines: messages are formatted in the role's threads, up to
   * LINES_AHEAD at once, and handed over in stream order.
   */
  private async deliverLines(
    plan: Extract<RunPlan, { kind: 'events' }>,
    record: BatchExportRecord,
    config: Record<string, unknown>,
    write: (lines: EventLines) => Promise<void>,
  ): Promise<{ read: number; kept: number }> {
    const filter = { include_events: config.include_events, exclude_events: config.exclude_events };
    const ahead: Promise<EventLines>[] = [];
    let read = 0;
    let kept = 0;
    const next = async () => {
      const lines = await ahead.shift()!;
      read += lines.read;
      if (lines.ends.length === 0) return;
      kept += lines.ends.length;
      await write(lines);
      this.deps.faults?.afterWrite?.(kept);
    };
    try {
      for await (const msg of this.deps.stream.read(record.team_id, plan.firstSeq, plan.lastSeq, this.signal)) {
        const formatted = this.deps.lines.format({ data: msg.data, seq: msg.seq, timeUs: msg.timeUs, plan, filter });
        // Observed at once: a task behind the one awaited may fail first (the run fails when its turn comes).
        formatted.catch(() => undefined);
        ahead.push(formatted);
        if (ahead.length >= LINES_AHEAD) await next();
      }
      while (ahead.length > 0) await next();
    } finally {
      ahead.length = 0;
    }
    this.signal.throwIfAborted();
    return { read, kept };
  }

  /** The export was deleted: its unfinished runs are Cancelled. */
  async cancelAll(): Promise<void> {
    if (!this.reporter) return;
    for (const run of await this.store.cancelUnfinished()) await this.report(run, 'Cancelled');
  }
}

function behindText(behind: readonly ShardBehind[]): string {
  const shown = behind.slice(0, 3).map((b) => `${b.stream} shard ${b.shard}: sequence ${b.seq} not processed, position ${b.position}`);
  return behind.length > 3 ? `${shown.join('; ')}; and ${behind.length - 3} more shard(s)` : shown.join('; ');
}
