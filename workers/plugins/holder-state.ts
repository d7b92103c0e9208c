// What the holder of a plugin config's lease keeps in PostgreSQL (table plugin_holders and its
// neighbours, migration 1700000000004): the fence it raised when it took the config over, where
// the config's destination stands in PROCESSED, the last period of each scheduled task and the
// jobs it took up. Every write is guarded by the fence, so a former holder (its lease lost, or a
// worker paused past its lease) can no longer move the position, start a task or a job.
import type pg from 'pg';
import { OwnershipLostError } from '../coordination/index.js';

export interface HolderStart {
  fence: number;
  /**
   * Where delivery goes on: after message `seq` (and the first `lines` events of the next), or
   * `undefined` for a config never delivered (it starts at the messages stored since it was set up).
   */
  delivered: { seq: number; lines: number } | undefined;
}

export interface TaskRun {
  /** Start of the period (UTC ms) the task was last started for. */
  slot: number;
  finished: boolean;
}

export class HolderState {
  private fence = 0;

  constructor(
    private readonly db: pg.Pool,
    readonly configId: number,
    readonly teamId: number,
    private readonly owner: string,
  ) {}

  /**
   * Takes the config over: raises its fence (waiting for a former holder's write in progress, so
   * this sees all of it or none) and reads where it stands. A PROCESSED created again since the
   * position was stored is read from its start.
   */
  async takeOver(streamCreated: string): Promise<HolderStart> {
    const client = await this.db.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO plugin_holders (plugin_config_id, team_id, fence, owner) VALUES ($1, $2, 0, $3)
         ON CONFLICT (plugin_config_id) DO NOTHING`,
        [this.configId, this.teamId, this.owner],
      );
      const { rows } = await client.query<{ fence: string; delivered_seq: string | null; delivered_lines: number; stream_created: string | null }>(
        `UPDATE plugin_holders SET fence = nextval('plugin_holder_fence'), owner = $2, team_id = $3, updated_at = now(),
           delivered_seq = CASE WHEN stream_created IS NOT NULL AND stream_created <> $4 THEN 0 ELSE delivered_seq END,
           delivered_lines = CASE WHEN stream_created IS NOT NULL AND stream_created <> $4 THEN 0 ELSE delivered_lines END,
           stream_created = $4
         WHERE plugin_config_id = $1
         RETURNING fence, delivered_seq, delivered_lines, stream_created`,
        [this.configId, this.owner, this.teamId, streamCreated],
      );
      await client.query('COMMIT');
      const row = rows[0]!;
      this.fence = Number(row.fence);
      return {
        fence: this.fence,
        delivered: row.delivered_seq === null ? undefined : { seq: Number(row.delivered_seq), lines: row.delivered_lines },
      };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /** Records that delivery reached (seq, lines). */
  async commitDelivery(seq: number, lines: number): Promise<void> {
    const { rowCount } = await this.db.query(
      'UPDATE plugin_holders SET delivered_seq = $3, delivered_lines = $4, updated_at = now() WHERE plugin_config_id = $1 AND fence = $2',
      [this.configId, this.fence, seq, lines],
    );
    if (rowCount !== 1) this.lost();
  }

  /** The scheduled tasks' last periods. */
  async taskRuns(): Promise<Map<string, TaskRun>> {
    const { rows } = await this.db.query<{ task: string; slot: Date; finished_at: Date | null }>('SELECT task, slot, finished_at FROM plugin_task_runs WHERE plugin_config_id = $1', [
      this.configId,
    ]);
    return new Map(rows.map((r) => [r.task, { slot: r.slot.getTime(), finished: r.finished_at !== null }]));
  }

  /**
   * Records `slot` as the task's last period; with `start`, as started now. False when it already
   * is at `slot` or later (another holder got there).
   */
  async claimTask(task: string, slot: number, start: boolean): Promise<boolean> {
    return this.underFence(async (client) => {
      const { rowCount } = await client.query(
        `INSERT INTO plugin_task_runs (plugin_config_id, task, slot, started_at, finished_at)
         VALUES ($1, $2, $3, CASE WHEN $4 THEN now() END, CASE WHEN $4 THEN NULL ELSE now() END)
         ON CONFLICT (plugin_config_id, task) DO UPDATE SET slot = EXCLUDED.slot, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at
         WHERE plugin_task_runs.slot < EXCLUDED.slot`,
        [this.configId, task, new Date(slot), start],
      );
      return rowCount === 1;
    });
  }

  async finishTask(task: string, slot: number): Promise<void> {
    await this.db.query('UPDATE plugin_task_runs SET finished_at = now() WHERE plugin_config_id = $1 AND task = $2 AND slot = $3', [this.configId, task, new Date(slot)]);
  }

  /** Which of these job ids were taken up already (run, running or interrupted). */
  async knownJobs(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const { rows } = await this.db.query<{ job_id: string }>('SELECT job_id FROM plugin_job_runs WHERE job_id = ANY($1::text[])', [ids]);
    return new Set(rows.map((r) => r.job_id));
  }

  /** Takes a job up; false when it was taken up already. */
  async claimJob(id: string, type: string): Promise<boolean> {
    return this.underFence(async (client) => {
      const { rowCount } = await client.query(
        `INSERT INTO plugin_job_runs (job_id, plugin_config_id, type) VALUES ($1, $2, $3) ON CONFLICT (job_id) DO NOTHING`,
        [id, this.configId, type],
      );
      return rowCount === 1;
    });
  }

  async finishJob(id: string, outcome: string): Promise<void> {
    await this.db.query('UPDATE plugin_job_runs SET finished_at = now(), outcome = $2 WHERE job_id = $1', [id, outcome]);
  }

  /** Jobs a former holder started and never finished (it stopped outright): marked interrupted, returned. */
  async interruptedJobs(): Promise<Array<{ id: string; type: string; startedAt: Date }>> {
    const { rows } = await this.db.query<{ job_id: string; type: string; started_at: Date }>(
      `UPDATE plugin_job_runs SET finished_at = now(), outcome = 'interrupted'
       WHERE plugin_config_id = $1 AND finished_at IS NULL RETURNING job_id, type, started_at`,
      [this.configId],
    );
    return rows.map((r) => ({ id: r.job_id, type: r.type, startedAt: r.started_at }));
  }

  /** Runs `fn` in a transaction that holds the config's row while the fence is ours. */
  private async underFence<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.db.connect();
    try {
      await client.query('BEGIN');
      const { rowCount } = await client.query('SELECT 1 FROM plugin_holders WHERE plugin_config_id = $1 AND fence = $2 FOR SHARE', [this.configId, this.fence]);
      if (rowCount !== 1) this.lost();
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private lost(): never {
    throw new OwnershipLostError(`plugin config ${this.configId}: fence ${this.fence} is no longer current (another worker holds it)`);
  }
}
