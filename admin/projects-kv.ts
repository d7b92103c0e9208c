// Keeps the NATS KV bucket `spate-projects` (project API key → { projectId, organizationId })
// equal to the projects table. PostgreSQL is the truth; the bucket is a copy ingest nodes watch.
//
// Three paths lead to a sync, because any one of them can miss a change:
//  - the request that changed a project syncs its keys before answering (read-your-writes);
//  - a trigger announces every change on channel `spate_projects` (LISTEN), so changes made by
//    another replica, the CLI or the bootstrap reach the bucket too;
//  - a full reconcile at start, after a lost LISTEN connection, after a failed sync, and on a
//    timer, which also removes keys that are no longer projects.
// Every sync reads the current row before writing, and syncs run one at a time, so the last
// write always reflects the latest committed state this process could see.
import { setTimeout as sleep } from 'node:timers/promises';
import { Kvm, type KV } from '@nats-io/kv';
import pg from 'pg';
import { PROJECTS_BUCKET, type Logger, type NatsConnection, type ProjectRecord } from '../lib/index.js';
import type { Pool } from './db/pool.js';

export const PROJECTS_CHANNEL = 'spate_projects';

const RETRY_MS = 2_000;
/** How long a request waits for its KV update before answering anyway (NATS down: it retries). */
const REQUEST_WAIT_MS = 2_000;

export interface ReconcileResult {
  put: number;
  deleted: number;
}

export class ProjectsKv {
  private chain: Promise<unknown> = Promise.resolve();
  private pending = new Set<string>();
  private flushScheduled = false;
  private listener: pg.Client | undefined;
  private listenerRetry: NodeJS.Timeout | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;

  private constructor(
    readonly kv: KV,
    private readonly pool: Pool,
    private readonly log: Logger,
  ) {}

  /** Opens (creating if needed) the bucket. */
  static async open(nc: NatsConnection, pool: Pool, log: Logger, replicas = 1): Promise<ProjectsKv> {
    const kv = await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1, replicas });
    return new ProjectsKv(kv, pool, log);
  }

  /**
   * Makes the bucket agree with PostgreSQL for these keys. Never throws: failures are logged and
   * retried. Waits at most `maxWaitMs`: with NATS unreachable the request that changed a project
   * still answers (PostgreSQL has the change; the bucket follows once NATS is back).
   */
  async sync(tokens: readonly string[], maxWaitMs = REQUEST_WAIT_MS): Promise<void> {
    if (tokens.length === 0) return;
    const done = this.enqueue('sync', () => this.syncNow(tokens));
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.log.warn({ tokens: tokens.length }, 'spate-projects KV update is slow (NATS unreachable?); answering without waiting');
        resolve();
      }, maxWaitMs);
    });
    await Promise.race([done, waited]);
    clearTimeout(timer);
  }

  /** Like sync, but throws when the bucket could not be updated. */
  async syncStrict(tokens: readonly string[]): Promise<void> {
    await this.enqueueStrict(() => this.syncNow(tokens));
  }

  /** Makes the whole bucket agree with PostgreSQL. Throws if it could not (callers at start want to know). */
  async reconcile(): Promise<ReconcileResult> {
    return this.enqueueStrict(() => this.reconcileNow());
  }

  /** Follows changes made elsewhere (LISTEN) and reconciles every `intervalMs`. */
  async follow(databaseUrl: string, intervalMs: number): Promise<void> {
    await this.listen(databaseUrl);
    this.timer = setInterval(() => void this.enqueue('reconcile', () => this.reconcileNow()), intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.retry);
    clearTimeout(this.listenerRetry);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    // Let a sync in progress finish, but do not hang on an unreachable NATS: the next start
    // reconciles anyway.
    await Promise.race([this.chain.catch(() => undefined), sleep(5_000, undefined, { ref: false })]);
  }

  // --- internals ----------------------------------------------------------------------------

  private enqueueStrict<T>(task: () => Promise<T>): Promise<T> {
    const run = this.chain.then(task, task);
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async enqueue(what: string, task: () => Promise<unknown>): Promise<void> {
    try {
      await this.enqueueStrict(task);
    } catch (err) {
      this.log.warn({ err }, `spate-projects KV ${what} failed; retrying with a full reconcile`);
      this.scheduleRetry();
    }
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.enqueue('reconcile', () => this.reconcileNow());
    }, RETRY_MS);
    this.retry.unref();
  }

  private async syncNow(tokens: readonly string[]): Promise<void> {
    const { rows } = await this.pool.query<{ api_token: string; id: number; organization_id: string }>(
      'select api_token, id, organization_id from projects where api_token = any($1::text[])',
      [tokens],
    );
    const wanted = new Map(rows.map((r) => [r.api_token, recordJson({ projectId: r.id, organizationId: r.organization_id })]));
    for (const token of new Set(tokens)) await this.apply(token, wanted.get(token));
  }

  private async reconcileNow(): Promise<ReconcileResult> {
    const { rows } = await this.pool.query<{ api_token: string; id: number; organization_id: string }>(
      'select api_token, id, organization_id from projects',
    );
    const wanted = new Map(rows.map((r) => [r.api_token, recordJson({ projectId: r.id, organizationId: r.organization_id })]));
    const result: ReconcileResult = { put: 0, deleted: 0 };
    for (const [token, value] of wanted) if ((await this.apply(token, value)) === 'put') result.put++;
    const present: string[] = [];
    for await (const key of await this.kv.keys()) present.push(key);
    for (const key of present) {
      if (!wanted.has(key) && (await this.apply(key, undefined)) === 'deleted') result.deleted++;
    }
    if (result.put > 0 || result.deleted > 0) this.log.info(result, 'reconciled spate-projects KV bucket');
    return result;
  }

  /** Puts `value` under `token` (or deletes it when undefined), unless the bucket already agrees. */
  private async apply(token: string, value: string | undefined): Promise<'put' | 'deleted' | 'same'> {
    const entry = await this.kv.get(token);
    const current = entry && entry.operation === 'PUT' ? entry.string() : undefined;
    if (current === value) return 'same';
    if (value === undefined) {
      await this.kv.delete(token);
      return 'deleted';
    }
    await this.kv.put(token, value);
    return 'put';
  }

  private async listen(databaseUrl: string): Promise<void> {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'spate-admin-listen' });
    const lost = (err?: unknown) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      void client.end().catch(() => undefined);
      this.log.warn({ err }, `lost LISTEN ${PROJECTS_CHANNEL} connection; reconnecting`);
      this.reconnectLater(databaseUrl);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.channel === PROJECTS_CHANNEL && msg.payload) this.queueToken(msg.payload);
    });
    this.listener = client;
    try {
      await client.connect();
      await client.query(`listen ${PROJECTS_CHANNEL}`);
    } catch (err) {
      if (this.listener === client) this.listener = undefined;
      client.removeAllListeners();
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      throw err;
    }
  }

  private reconnectLater(databaseUrl: string): void {
    if (this.stopped || this.listenerRetry) return;
    this.listenerRetry = setTimeout(() => {
      this.listenerRetry = undefined;
      this.listen(databaseUrl).then(
        // Changes may have been announced while nobody listened.
        () => this.enqueue('reconcile', () => this.reconcileNow()),
        (err: unknown) => {
          this.log.warn({ err }, `LISTEN ${PROJECTS_CHANNEL} reconnect failed`);
          this.reconnectLater(databaseUrl);
        },
      );
    }, 1_000);
    this.listenerRetry.unref();
  }

  /** Notifications arrive one token at a time; sync them in batches. */
  private queueToken(token: string): void {
    this.pending.add(token);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const tokens = [...this.pending];
      this.pending.clear();
      void this.sync(tokens);
    });
  }
}

function recordJson(record: ProjectRecord): string {
  return JSON.stringify({ projectId: record.projectId, organizationId: record.organizationId });
}
