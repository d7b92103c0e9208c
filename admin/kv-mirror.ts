// Keeps a NATS KV bucket equal to what PostgreSQL says it should hold. PostgreSQL is the truth;
// the bucket is a copy that ingest nodes and workers watch.
//
// Three paths lead to a sync, because any one of them can miss a change:
//  - the request that made a change syncs its keys before answering (read-your-writes);
//  - a trigger announces every change on a LISTEN channel, so changes made by another replica,
//    the CLI, the bootstrap or a cascade reach the bucket too;
//  - a full reconcile at start, after a lost LISTEN connection, after a failed sync, and on a
//    timer, which also removes keys that should no longer be there.
// Every sync reads the current rows before writing, and syncs run one at a time, so the last
// write always reflects the latest committed state this process could see.
//
// A write whose request timed out may still land later, after newer syncs: so every write names
// the revision it read (the server refuses it if the key changed since), and the next sync of
// such a key writes even when the bucket looks right, which makes the late write refused.
import { setTimeout as sleep } from 'node:timers/promises';
import { JetStreamApiError } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import pg from 'pg';
import { exponentialBackoff, isWrongLastSequence, type Logger, type NatsConnection } from '../lib/index.js';
import type { Pool } from './db/pool.js';

const RETRY_MS = 2_000;
const MAX_RETRY_MS = 60_000;
/** How long a request waits for its KV update before answering anyway (NATS down: it retries). */
const REQUEST_WAIT_MS = 2_000;
/** Writes of one key refused because it changed meanwhile, before the sync gives up (and retries). */
const MAX_CONFLICTS = 5;

export interface ReconcileResult {
  put: number;
  deleted: number;
  /** Keys that could not be written (logged; retried by the next reconcile). */
  failed: number;
}

/** What one bucket mirrors. Values are compared as strings, so build them deterministically. */
export interface MirrorSpec {
  bucket: string;
  /** The NOTIFY channel whose payloads are keys of this bucket. */
  channel: string;
  /** The values these keys should have now (a key missing from the map should not exist). */
  load(pool: Pool, keys: readonly string[]): Promise<Map<string, string>>;
  /** Every key the bucket should hold, with its value. */
  loadAll(pool: Pool): Promise<Map<string, string>>;
}

export class KvMirror {
  private chain: Promise<unknown> = Promise.resolve();
  private pending = new Set<string>();
  private flushScheduled = false;
  private listener: pg.Client | undefined;
  private listenerRetry: NodeJS.Timeout | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private stopped = false;
  private retriesInRow = 0;
  /** Keys whose last write got no answer: it may still land. */
  private readonly unanswered = new Set<string>();

  /** `open` is the usual way; tests pass a wrapped bucket here. */
  constructor(
    readonly kv: KV,
    private readonly spec: MirrorSpec,
    private readonly pool: Pool,
    private readonly log: Logger,
  ) {}

  /** Opens (creating if needed) the bucket. */
  static async open(nc: NatsConnection, spec: MirrorSpec, pool: Pool, log: Logger, replicas = 1): Promise<KvMirror> {
    const kv = await new Kvm(nc).create(spec.bucket, { history: 1, replicas });
    return new KvMirror(kv, spec, pool, log);
  }

  get bucket(): string {
    return this.spec.bucket;
  }

  /**
   * Makes the bucket agree with PostgreSQL for these keys. Never throws: failures are logged and
   * retried. Waits at most `maxWaitMs`: with NATS unreachable the request that made the change
   * still answers (PostgreSQL has it; the bucket follows once NATS is back).
   */
  async sync(keys: readonly string[], maxWaitMs = REQUEST_WAIT_MS): Promise<void> {
    if (keys.length === 0) return;
    const done = this.enqueue('sync', () => this.syncNow(keys));
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.log.warn({ bucket: this.spec.bucket, keys: keys.length }, 'KV update is slow (NATS unreachable?); answering without waiting');
        resolve();
      }, maxWaitMs);
    });
    await Promise.race([done, waited]);
    clearTimeout(timer);
  }

  /** Like sync, but throws when the bucket could not be updated. */
  async syncStrict(keys: readonly string[]): Promise<void> {
    await this.enqueueStrict(() => this.syncNow(keys));
  }

  /**
   * Makes the whole bucket agree with PostgreSQL. Throws if it could not read PostgreSQL or list
   * the bucket (callers at start want to know); keys that could not be written are counted in
   * `failed`, logged and retried.
   */
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
      this.log.warn({ err, bucket: this.spec.bucket }, `KV ${what} failed; retrying with a full reconcile`);
      this.scheduleRetry();
    }
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retry) return;
    // 2 s, 4 s, … up to a minute while the failures go on (a key that cannot be written at all
    // must not flood the log).
    const delay = exponentialBackoff(RETRY_MS, this.retriesInRow++, MAX_RETRY_MS);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.enqueue('reconcile', () => this.reconcileNow());
    }, delay);
    this.retry.unref();
  }

  private async syncNow(keys: readonly string[]): Promise<void> {
    const wanted = await this.spec.load(this.pool, keys);
    const failures: unknown[] = [];
    for (const key of new Set(keys)) await this.apply(key, wanted.get(key)).catch((err: unknown) => failures.push(err));
    throwIfAny(failures);
  }

  private async reconcileNow(): Promise<ReconcileResult> {
    const wanted = await this.spec.loadAll(this.pool);
    const result: ReconcileResult = { put: 0, deleted: 0, failed: 0 };
    // One key that cannot be written (say, a value over NATS's max payload) must not keep the
    // others stale: every key is tried, then the failures are logged and retried.
    const failures: unknown[] = [];
    const count = async (key: string, value: string | undefined) => {
      try {
        const done = await this.apply(key, value);
        if (done === 'put') result.put++;
        if (done === 'deleted') result.deleted++;
      } catch (err) {
        failures.push(err);
      }
    };
    for (const [key, value] of wanted) await count(key, value);
    // Keys with an unanswered write count as present: the write may land later.
    const present = new Set(this.unanswered);
    for await (const key of await this.kv.keys()) present.add(key);
    for (const key of present) if (!wanted.has(key)) await count(key, undefined);
    result.failed = failures.length;
    if (result.put > 0 || result.deleted > 0) this.log.info({ ...result, bucket: this.spec.bucket }, 'reconciled KV bucket');
    if (failures.length > 0) {
      this.log.warn({ err: failures[0], failed: failures.length, bucket: this.spec.bucket }, 'KV keys could not be written; retrying');
      this.scheduleRetry();
    } else {
      this.retriesInRow = 0;
    }
    return result;
  }

  /**
   * Puts `value` under `key` (or deletes it when undefined), unless the bucket already agrees.
   * The write names the revision just read; when the key changed since, PostgreSQL and the
   * bucket are read again.
   */
  private async apply(key: string, value: string | undefined): Promise<'put' | 'deleted' | 'same'> {
    for (let conflicts = 0; ; ) {
      const entry = await this.kv.get(key);
      const current = entry && entry.operation === 'PUT' ? entry.string() : undefined;
      // After an unanswered write, agreeing is not enough: writing over the revision read now is
      // what makes the server refuse that write if it lands later.
      if (current === value && !this.unanswered.has(key)) return 'same';
      const revision = entry?.revision ?? 0;
      try {
        if (value === undefined) {
          // The client sends no condition for revision 0 (a key never written), so this delete is
          // unconditional; a key someone wrote meanwhile from a newer PostgreSQL state comes back
          // with that change's notice.
          await this.kv.delete(key, { previousSeq: revision });
        } else {
          // Revision 0 means "only if the key was never written" (update() refuses 0).
          await this.kv.put(key, value, { previousSeq: revision });
        }
        this.unanswered.delete(key);
        return value === undefined ? 'deleted' : 'put';
      } catch (err) {
        // An error answer means nothing was written; anything else (a timeout) may still land.
        if (!(err instanceof JetStreamApiError)) this.unanswered.add(key);
        if (!isWrongLastSequence(err) || ++conflicts >= MAX_CONFLICTS) throw err;
        value = (await this.spec.load(this.pool, [key])).get(key);
      }
    }
  }

  private async listen(databaseUrl: string): Promise<void> {
    const channel = this.spec.channel;
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'spate-admin-listen' });
    const lost = (err?: unknown) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      void client.end().catch(() => undefined);
      this.log.warn({ err }, `lost LISTEN ${channel} connection; reconnecting`);
      this.reconnectLater(databaseUrl);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      if (msg.channel === channel && msg.payload) this.queueKey(msg.payload);
    });
    this.listener = client;
    try {
      await client.connect();
      await client.query(`listen ${channel}`);
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
          this.log.warn({ err }, `LISTEN ${this.spec.channel} reconnect failed`);
          this.reconnectLater(databaseUrl);
        },
      );
    }, 1_000);
    this.listenerRetry.unref();
  }

  /** Notifications arrive one key at a time; sync them in batches. */
  private queueKey(key: string): void {
    this.pending.add(key);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      const keys = [...this.pending];
      this.pending.clear();
      void this.sync(keys);
    });
  }
}

function throwIfAny(failures: unknown[]): void {
  if (failures.length === 1) throw failures[0];
  if (failures.length > 1) throw new AggregateError(failures, `${failures.length} KV writes failed`);
}
