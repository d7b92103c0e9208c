// The runner's state in PostgreSQL (tables in workers/migrations/…_batch-exports.ts). Every write
// names the fence the lease holder raised at take-over: a former holder's write changes nothing
// and fails with OwnershipLostError.
import type pg from 'pg';
import { OwnershipLostError } from '../coordination/index.js';
import type { RunPlan } from './plan.js';

export type RunStatus = 'Starting' | 'Running' | 'Completed' | 'Failed' | 'FailedRetryable' | 'Cancelled';

export interface ScheduleState {
  exportId: string;
  fence: number;
  nextStart: number;
  chainEnd: number | null;
  chainSeq: number | null;
}

export interface StoredRun {
  id: string;
  exportId: string;
  backfillId: string | null;
  start: number;
  end: number;
  status: RunStatus;
  plan: RunPlan | null;
  attempts: number;
  nextAttemptAt: number | null;
  recordsCompleted: number | null;
  bytesExported: number | null;
}

export interface StoredBackfill {
  id: string;
  startAt: number;
  endAt: number;
  intervalSeconds: number;
  totalRuns: number;
}

const ms = (d: Date | null) => (d === null ? null : d.getTime());

interface RunRow {
  id: string;
  export_id: string;
  backfill_id: string | null;
  data_interval_start: Date;
  data_interval_end: Date;
  status: RunStatus;
  plan: RunPlan | null;
  attempts: number;
  next_attempt_at: Date | null;
  records_completed: string | null;
  bytes_exported: string | null;
}

function runOf(r: RunRow): StoredRun {
  return {
    id: r.id,
    exportId: r.export_id,
    backfillId: r.backfill_id,
    start: r.data_interval_start.getTime(),
    end: r.data_interval_end.getTime(),
    status: r.status,
    plan: r.plan,
    attempts: r.attempts,
    nextAttemptAt: ms(r.next_attempt_at),
    recordsCompleted: r.records_completed === null ? null : Number(r.records_completed),
    bytesExported: r.bytes_exported === null ? null : Number(r.bytes_exported),
  };
}

export class RunStore {
  constructor(
    private readonly db: pg.Pool,
    readonly exportId: string,
    private fence = 0,
  ) {}

  /** Raises the export's fence (creating its schedule at `firstStart` when new); a former holder can no longer write. */
  async takeOver(teamId: number, owner: string, firstStart: number): Promise<ScheduleState> {
    const { rows } = await this.db.query<{ fence: string; next_start: Date; chain_end: Date | null; chain_seq: string | null }>(
      `INSERT INTO export_schedules (export_id, team_id, fence, owner, next_start) VALUES ($1, $2, nextval('export_fence'), $3, $4)
       ON CONFLICT (export_id) DO UPDATE SET fence = nextval('export_fence'), owner = $3, updated_at = now()
       RETURNING fence, next_start, chain_end, chain_seq`,
      [this.exportId, teamId, owner, new Date(firstStart)],
    );
    const row = rows[0]!;
    this.fence = Number(row.fence);
    return { exportId: this.exportId, fence: this.fence, nextStart: row.next_start.getTime(), chainEnd: ms(row.chain_end), chainSeq: row.chain_seq === null ? null : Number(row.chain_seq) };
  }

  private async fenced<T extends pg.QueryResultRow>(client: pg.Pool | pg.PoolClient, sql: string, params: unknown[]): Promise<pg.QueryResult<T>> {
    const result = await client.query<T>(sql, params);
    return result;
  }

  /** Fails when another holder raised the fence since take-over. */
  private async checkFence(client: pg.Pool | pg.PoolClient): Promise<void> {
    const { rows } = await client.query<{ fence: string }>('SELECT fence FROM export_schedules WHERE export_id = $1 FOR UPDATE', [this.exportId]);
    if (Number(rows[0]?.fence) !== this.fence) throw new OwnershipLostError(`export ${this.exportId}: another worker took it over`);
  }

  private async inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.db.connect();
    try {
      await client.query('BEGIN');
      await this.checkFence(client);
      const out = await work(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /** Moves the schedule on past skipped intervals (paused, outside start_at/end_at). */
  async skipTo(nextStart: number): Promise<void> {
    await this.inTransaction((c) => this.fenced(c, 'UPDATE export_schedules SET next_start = $2, updated_at = now() WHERE export_id = $1', [this.exportId, new Date(nextStart)]));
  }

  /** Records a new run (status Starting) and, for a scheduled one, moves the schedule past its interval. */
  async createRun(run: { id: string; backfillId: string | null; start: number; end: number }, scheduleNext?: number): Promise<StoredRun> {
    return this.inTransaction(async (c) => {
      const { rows } = await c.query<RunRow>(
        `INSERT INTO export_runs (id, export_id, backfill_id, data_interval_start, data_interval_end, status)
         VALUES ($1, $2, $3, $4, $5, 'Starting') ON CONFLICT (id) DO UPDATE SET updated_at = export_runs.updated_at RETURNING *`,
        [run.id, this.exportId, run.backfillId, new Date(run.start), new Date(run.end)],
      );
      if (scheduleNext !== undefined) await c.query('UPDATE export_schedules SET next_start = $2, updated_at = now() WHERE export_id = $1', [this.exportId, new Date(scheduleNext)]);
      return runOf(rows[0]!);
    });
  }

  /** Fixes a run's plan; a scheduled run's plan also moves the chain on to its last sequence. */
  async savePlan(run: StoredRun, plan: RunPlan): Promise<void> {
    await this.inTransaction(async (c) => {
      await c.query(`UPDATE export_runs SET plan = $2, status = 'Running', updated_at = now() WHERE id = $1 AND plan IS NULL`, [run.id, JSON.stringify(plan)]);
      if (run.backfillId === null && plan.kind === 'events') {
        await c.query('UPDATE export_schedules SET chain_end = $2, chain_seq = $3, updated_at = now() WHERE export_id = $1', [this.exportId, new Date(run.end), plan.lastSeq]);
      }
    });
  }

  async markRunning(runId: string): Promise<number> {
    const { rows } = await this.inTransaction((c) =>
      c.query<{ attempts: number }>(`UPDATE export_runs SET status = 'Running', attempts = attempts + 1, updated_at = now() WHERE id = $1 RETURNING attempts`, [runId]),
    );
    return rows[0]?.attempts ?? 1;
  }

  async finish(runId: string, outcome: { status: RunStatus; records?: number; bytes?: number; error?: string | null; nextAttemptAt?: number | null }): Promise<void> {
    const terminal = outcome.status !== 'FailedRetryable';
    await this.inTransaction((c) =>
      c.query(
        `UPDATE export_runs SET status = $2, records_completed = coalesce($3, records_completed), bytes_exported = coalesce($4, bytes_exported),
           latest_error = $5, next_attempt_at = $6, finished_at = CASE WHEN $7 THEN now() END, updated_at = now() WHERE id = $1`,
        [runId, outcome.status, outcome.records ?? null, outcome.bytes ?? null, outcome.error ?? null, outcome.nextAttemptAt ? new Date(outcome.nextAttemptAt) : null, terminal],
      ),
    );
  }

  /** The oldest run not finished (after a crash, a lease move or while retrying). */
  async unfinishedRun(): Promise<StoredRun | undefined> {
    const { rows } = await this.db.query<RunRow>(
      `SELECT * FROM export_runs WHERE export_id = $1 AND status IN ('Starting', 'Running', 'FailedRetryable') ORDER BY created_at, data_interval_start LIMIT 1`,
      [this.exportId],
    );
    return rows[0] && runOf(rows[0]);
  }

  async addBackfill(b: StoredBackfill & { createdAt: number }): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO export_backfills (id, export_id, start_at, end_at, interval_seconds, total_runs, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
      [b.id, this.exportId, new Date(b.startAt), new Date(b.endAt), b.intervalSeconds, b.totalRuns, new Date(b.createdAt)],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Backfills with runs not yet created, oldest first, with how many runs each has. */
  async pendingBackfills(): Promise<Array<StoredBackfill & { runsCreated: number }>> {
    const { rows } = await this.db.query<{ id: string; start_at: Date; end_at: Date; interval_seconds: number; total_runs: number; runs: string }>(
      `SELECT b.id, b.start_at, b.end_at, b.interval_seconds, b.total_runs, (SELECT count(*) FROM export_runs r WHERE r.backfill_id = b.id) AS runs
       FROM export_backfills b WHERE b.export_id = $1 ORDER BY b.created_at, b.id`,
      [this.exportId],
    );
    return rows
      .map((r) => ({ id: r.id, startAt: r.start_at.getTime(), endAt: r.end_at.getTime(), intervalSeconds: r.interval_seconds, totalRuns: r.total_runs, runsCreated: Number(r.runs) }))
      .filter((b) => b.runsCreated < b.totalRuns);
  }

  /** Completed runs of the other kind whose ranges overlap [from, to] (what a plan leaves to them). */
  async completedRanges(kind: 'scheduled' | 'backfill', from: number, to: number): Promise<RunPlan[]> {
    const { rows } = await this.db.query<{ plan: RunPlan }>(
      `SELECT plan FROM export_runs WHERE export_id = $1 AND status = 'Completed' AND plan IS NOT NULL AND plan->>'kind' = 'events'
         AND (backfill_id IS ${kind === 'scheduled' ? '' : 'NOT '}NULL)
         AND (plan->>'firstSeq')::bigint <= $3 AND (plan->>'lastSeq')::bigint >= $2`,
      [this.exportId, from, to],
    );
    return rows.map((r) => r.plan);
  }

  /** Statuses of the newest `count` finished scheduled runs (for the auto-pause rule). */
  async recentScheduledStatuses(count: number): Promise<RunStatus[]> {
    const { rows } = await this.db.query<{ status: RunStatus }>(
      `SELECT status FROM export_runs WHERE export_id = $1 AND backfill_id IS NULL AND status IN ('Completed', 'Failed')
       ORDER BY data_interval_end DESC LIMIT $2`,
      [this.exportId, count],
    );
    return rows.map((r) => r.status);
  }

  /** Runs not finished when the export was deleted: Cancelled. */
  async cancelUnfinished(): Promise<StoredRun[]> {
    const { rows } = await this.db.query<RunRow>(
      `UPDATE export_runs SET status = 'Cancelled', finished_at = now(), updated_at = now()
       WHERE export_id = $1 AND status IN ('Starting', 'Running', 'FailedRetryable') RETURNING *`,
      [this.exportId],
    );
    return rows.map(runOf);
  }
}
