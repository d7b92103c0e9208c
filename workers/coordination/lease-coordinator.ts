// Membership and leases in the NATS KV bucket `spate-workers` (ARCHITECTURE: workers).
// nats-server 2.9 has no per-key TTL: the bucket's max_age is the lease TTL, and a holder renews
// by writing a new revision (update with the revision it holds). Keys:
//   members.<workerId>  renewed by each live worker
//   <set>.<name>        a lease of a lease set: created by its holder, renewed, deleted on release
//                       (`shards.<n>` for shard n; a role adds its own sets, e.g. `export.<id>`)
// Every worker computes the same assignment of each set's names from the live members
// (assignment.ts); it releases leases that are no longer its own and creates the free ones that
// are. A watch on the bucket makes joins and leaves take effect at once; a worker killed with -9
// disappears when its keys expire (no event is sent for that, so the periodic tick notices it).
// A KV call may time out here and still land in the bucket (a slow answer on a loaded machine):
// a lease is recognised as this process's own by the instance id in its value and adopted, so a
// late answer neither orphans a lease until the TTL nor leaves a released lease behind.
import { randomUUID } from 'node:crypto';
import { KvWatchInclude, Kvm, type KV, type KvWatchEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { isWrongLastSequence, type Logger } from '../../lib/index.js';
import { assignBalanced } from './assignment.js';
import { errorText } from './failures.js';
import type { CoordinationMetrics } from './metrics.js';

export const WORKERS_BUCKET = 'spate-workers';

/** A lease this worker holds: `<set>.<name>` in the bucket. */
export interface Lease {
  readonly set: string;
  readonly name: string;
  /** Local time before which this worker may act under the lease (moves on with each renewal). */
  deadline: number;
  revision: number;
}

/** What runs while a lease is held; stopped when the lease is released or lost. */
export interface LeaseRunner {
  stop(): Promise<void>;
}

/**
 * A kind of lease a role holds, e.g. `{ set: 'export', names: () => exportIds }` for one runner
 * per batch export: every name is held by one live worker at a time, spread like shards.
 */
export interface LeaseSet {
  /** The key prefix: lower-case letters, digits and '-'; not 'members'. */
  readonly set: string;
  /** The names that should be held now (asked every round; letters, digits, '-', '_', '='). */
  names(): readonly string[];
  /**
   * Only workers that hold this set take its leases (a role a worker may leave off, e.g.
   * WORKER_EXPORTS=false): each announces it with a key `holds.<set>.<workerId>`, renewed with
   * its membership. Without it, the set's names are spread over every live member.
   */
  readonly optIn?: boolean;
  start(lease: Lease, lost: (reason: string) => void): LeaseRunner;
}

export interface ShardLease extends Lease {
  readonly shard: number;
}

/** What runs for an owned shard (the persons role's three stream processors). */
export type ShardRunner = LeaseRunner;

export const SHARD_LEASES = 'shards';

/** The shards 0..shardCount-1 as a lease set: `shards.<n>`. */
export function shardLeases(shardCount: number, startShard: (lease: ShardLease, lost: (reason: string) => void) => ShardRunner): LeaseSet {
  const names = Array.from({ length: shardCount }, (_, shard) => String(shard));
  return {
    set: SHARD_LEASES,
    names: () => names,
    // The same object, so the runner sees each renewal's deadline.
    start: (lease, lost) => startShard(Object.assign(lease, { shard: Number(lease.name) }), lost),
  };
}

export interface CoordinatorOptions {
  workerId: string;
  ttlMs: number;
}

const SET_NAME = /^[a-z][a-z0-9-]*$/;
const LEASE_NAME = /^[A-Za-z0-9_=-]+$/;

export async function openWorkersBucket(nc: NatsConnection, ttlMs: number, replicas: number, logger: Logger): Promise<{ kv: KV; ttlMs: number }> {
  const kv = await new Kvm(nc).create(WORKERS_BUCKET, { history: 1, ttl: ttlMs, replicas });
  const status = await kv.status();
  if (status.ttl > 0 && status.ttl !== ttlMs) {
    logger.warn({ configured: ttlMs, bucket: status.ttl }, 'the workers bucket was created with another lease TTL: using the bucket\'s');
    return { kv, ttlMs: status.ttl };
  }
  return { kv, ttlMs };
}

export class LeaseCoordinator {
  private readonly sets = new Map<string, LeaseSet>();
  /** Leases this worker holds, by key; `releasing` while its runner finishes (the lease is still renewed meanwhile). */
  private readonly owned = new Map<string, { lease: Lease; runner: LeaseRunner; releasing?: Promise<void> }>();
  private readonly lost = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private watcher: { stop(): void } | undefined;
  private members: string[] = [];
  /** Holders of each opt-in set as the last listing found them: a renewal of a known holder's key changes nothing. */
  private readonly holders = new Map<string, Set<string>>();
  /** Members whose key the watch saw deleted since the last listing: a listing that fails cannot hide a clean leave. */
  private readonly departed = new Set<string>();
  private joined = false;
  /** Written in every lease value: tells this process's leases from any other's, even one with the same worker id. */
  private readonly instance = randomUUID();

  constructor(
    private readonly kv: KV,
    private readonly options: CoordinatorOptions,
    sets: readonly LeaseSet[],
    private readonly logger: Logger,
    private readonly metrics: CoordinationMetrics,
  ) {
    for (const set of sets) this.addLeaseSet(set);
  }

  /** Holds this set's leases too, from the next round on (refresh() runs one now). */
  addLeaseSet(set: LeaseSet): void {
    if (!SET_NAME.test(set.set) || set.set === 'members') throw new Error(`invalid lease set name: ${JSON.stringify(set.set)}`);
    if (this.sets.has(set.set)) throw new Error(`lease set ${set.set} is held already`);
    this.sets.set(set.set, set);
  }

  /** Runs a round soon: a role whose names changed (an export created) does not wait for the next tick. */
  refresh(): void {
    this.schedule();
  }

  private holdsKey(set: string): string {
    return `holds.${set}.${this.options.workerId}`;
  }

  private optInSets(): LeaseSet[] {
    return [...this.sets.values()].filter((s) => s.optIn === true);
  }

  /** Live members that announced they hold `set` (this worker included); undefined when the listing failed. */
  private async holdersOf(set: string, members: readonly string[]): Promise<string[] | undefined> {
    try {
      const holders = new Set<string>([this.options.workerId, ...(await this.listKeys(`holds.${set}.`, 'listing holders'))]);
      this.holders.set(set, holders);
      return members.filter((m) => holders.has(m));
    } catch (err) {
      this.logger.warn({ set, err: errorText(err) }, 'cannot list the holders of a lease set: keeping its current leases');
      return undefined;
    }
  }

  private get memberKey(): string {
    return `members.${this.options.workerId}`;
  }

  /** Renewals happen this often: a lease survives three missed renewals. */
  private get renewEveryMs(): number {
    return Math.max(200, Math.floor(this.options.ttlMs / 4));
  }

  /** How long after sending a write this worker may rely on it: the TTL less a margin for slow clocks and pauses. */
  private deadlineFrom(sentAt: number): number {
    return sentAt + this.options.ttlMs - Math.min(1_000, Math.floor(this.options.ttlMs / 5));
  }

  async start(): Promise<void> {
    this.startWatch();
    // Through schedule() like every round: a bucket change seen meanwhile must wait for this round,
    // not run beside it (it would find this round's leases its own and start those runners twice).
    this.schedule();
    await this.ticking;
    this.timer = setInterval(() => this.schedule(), this.renewEveryMs);
  }

  get joinedCluster(): boolean {
    return this.joined;
  }

  /** Names of a set whose leases this worker holds (and is not releasing), sorted. */
  held(set: string): string[] {
    return [...this.owned.values()]
      .filter((h) => h.lease.set === set && !h.releasing)
      .map((h) => h.lease.name)
      .sort();
  }

  liveMembers(): string[] {
    return [...this.members];
  }

  /** Leaves the cluster: others stop assigning leases to us, each runner finishes, then its lease is freed. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    this.watcher?.stop();
    await this.ticking;
    await this.kv.delete(this.memberKey).catch((err: unknown) => this.logger.warn({ err: errorText(err) }, 'could not remove membership'));
    await Promise.all(this.optInSets().map((set) => this.kv.delete(this.holdsKey(set.set)).catch(() => undefined)));
    await Promise.all([...this.owned.keys()].map((key) => this.release(key)));
    this.metrics.ownedShards.set(0);
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = this.tick()
      .catch((err: unknown) => this.logger.warn({ err: errorText(err) }, 'lease coordination failed'))
      .finally(() => {
        this.ticking = undefined;
        if (this.again) {
          this.again = false;
          this.schedule();
        }
      });
  }

  private startWatch(): void {
    const loop = async () => {
      while (!this.stopped) {
        try {
          const iter = await this.kv.watch({ key: '>', include: KvWatchInclude.UpdatesOnly });
          this.watcher = iter;
          for await (const entry of iter) this.onChange(entry);
        } catch (err) {
          if (!this.stopped) this.logger.debug({ err: errorText(err) }, 'bucket watch ended: restarting it');
        }
        if (!this.stopped) await new Promise((r) => setTimeout(r, 500));
      }
    };
    void loop();
  }

  private onChange(entry: KvWatchEntry): void {
    const removed = entry.operation === 'DEL' || entry.operation === 'PURGE';
    if (entry.key.startsWith('members.')) {
      const id = entry.key.slice('members.'.length);
      if (removed) this.departed.add(id);
      else this.departed.delete(id);
      if (removed || !this.members.includes(id)) this.schedule();
    } else if (entry.key.startsWith('holds.')) {
      // A worker took up or left off an opt-in set: its names are spread again. Not on a renewal of
      // a holder already known: every round renews this worker's own key, so scheduling on each
      // put ran rounds back to back (~45 a second, each listing the bucket through a new consumer).
      const [, set = '', id = ''] = entry.key.split('.');
      if (removed || !this.holders.get(set)?.has(id)) this.schedule();
    } else if (removed) {
      // A lease freed: it may be one this worker should take.
      this.schedule();
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const { workerId } = this.options;
    // Side by side: when NATS answers slowly, a tick must not wait out one timeout after another.
    const heartbeat = async () => {
      try {
        await withTimeout(
          Promise.all([
            this.kv.put(this.memberKey, JSON.stringify({ id: workerId, pid: process.pid, at: new Date().toISOString() })),
            ...this.optInSets().map((set) => this.kv.put(this.holdsKey(set.set), '1')),
          ]),
          this.kvTimeoutMs,
          'membership heartbeat',
        );
        this.joined = true;
      } catch (err) {
        this.logger.warn({ err: errorText(err) }, 'membership heartbeat failed');
      }
    };
    await Promise.all([heartbeat(), this.renewAll()]);
    for (const key of this.lost) {
      this.lost.delete(key);
      if (this.owned.has(key)) void this.release(key);
    }

    let members: string[];
    try {
      members = await this.listMembers();
      for (const id of this.departed) if (!members.includes(id)) this.departed.delete(id);
    } catch (err) {
      // A member that left cleanly deleted its key and the watch saw it: its leases are taken over
      // now, not once listing works again (a loaded NATS can fail listings for several ticks).
      const left = this.members.filter((m) => this.departed.has(m));
      if (left.length === 0) {
        this.logger.warn({ err: errorText(err) }, 'cannot list members: keeping the current leases');
        return;
      }
      members = this.members.filter((m) => !this.departed.has(m));
      this.logger.warn({ err: errorText(err), left }, 'cannot list members: acting on the leaves the watch saw');
    }
    if (!members.includes(workerId)) members.push(workerId);
    const changed = members.slice().sort().join(',') !== this.members.slice().sort().join(',');
    this.members = members;

    const acquiring: Promise<void>[] = [];
    const desiredBySet: Record<string, string[]> = {};
    for (const set of this.sets.values()) {
      const holders = set.optIn ? await this.holdersOf(set.set, members) : members;
      if (!holders) continue;
      const desired = new Set(assignBalanced(holders, this.validNames(set)).get(workerId) ?? []);
      desiredBySet[set.set] = [...desired];
      // Releases run in the background: a runner finishing its work must not hold up renewals of the others.
      for (const name of this.held(set.set)) if (!desired.has(name)) void this.release(leaseKey(set.set, name));
      // All at once: a take-over costs one round trip, not one per lease.
      for (const name of desired) if (!this.owned.has(leaseKey(set.set, name))) acquiring.push(this.acquire(set, name));
    }
    if (changed) this.logger.info({ members: members.length, desired: desiredBySet }, 'membership changed');
    await Promise.all(acquiring);
    this.metrics.ownedShards.set(this.held(SHARD_LEASES).length);
  }

  private validNames(set: LeaseSet): string[] {
    const names = set.names();
    const valid = names.filter((n) => LEASE_NAME.test(n));
    if (valid.length !== names.length) {
      this.logger.warn({ set: set.set, invalid: names.filter((n) => !LEASE_NAME.test(n)).slice(0, 10) }, 'lease names skipped: letters, digits, -, _ and = only');
    }
    return valid;
  }

  /** KV calls of a tick must end well within a TTL, or renewals would starve. */
  private get kvTimeoutMs(): number {
    return Math.max(500, Math.floor(this.options.ttlMs / 3));
  }

  private listMembers(): Promise<string[]> {
    return this.listKeys('members.', 'listing members');
  }

  /** The keys under `prefix` (without it), each once. */
  private async listKeys(prefix: string, what: string): Promise<string[]> {
    const out: string[] = [];
    const iter = await withTimeout(this.kv.keys(`${prefix}*`), this.kvTimeoutMs, what);
    // A busy bucket keeps a listing going (keys renewed meanwhile come again): cut it off.
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      iter.stop();
    }, this.kvTimeoutMs);
    try {
      for await (const key of iter) out.push(key.slice(prefix.length));
    } finally {
      clearTimeout(timer);
    }
    if (timedOut) throw new Error(`${what} timed out`);
    return [...new Set(out)];
  }


  private leaseValue(): string {
    return JSON.stringify({ owner: this.options.workerId, instance: this.instance, at: new Date().toISOString() });
  }

  /** The revision of a lease key while it holds this process's lease (a write of ours whose answer was lost or late). */
  private async ownRevision(key: string): Promise<number | undefined> {
    const entry = await withTimeout(this.kv.get(key), this.kvTimeoutMs, 'lease read');
    if (entry?.operation !== 'PUT') return undefined;
    try {
      return (JSON.parse(entry.string()) as { instance?: unknown }).instance === this.instance ? entry.revision : undefined;
    } catch {
      return undefined;
    }
  }

  /** Writes the lease again over a revision of ours that this worker lost track of; the deadline runs from this write. */
  private async adopt(key: string): Promise<{ revision: number; deadline: number } | undefined> {
    const held = await this.ownRevision(key);
    if (held === undefined) return undefined;
    const sentAt = Date.now();
    const revision = await withTimeout(this.kv.update(key, this.leaseValue(), held), this.kvTimeoutMs, 'lease adoption');
    return { revision, deadline: this.deadlineFrom(sentAt) };
  }

  private async acquire(set: LeaseSet, name: string): Promise<void> {
    const key = leaseKey(set.set, name);
    const sentAt = Date.now();
    let written: { revision: number; deadline: number } | undefined;
    try {
      const revision = await withTimeout(this.kv.create(key, this.leaseValue()), this.kvTimeoutMs, 'lease create');
      written = { revision, deadline: this.deadlineFrom(sentAt) };
    } catch {
      // Held by another worker, NATS away, or our own create landed after its answer timed out.
      written = await this.adopt(key).catch(() => undefined);
    }
    if (!written) return; // try again next tick
    const lease: Lease = { set: set.set, name, ...written };
    const runner = set.start(lease, (reason) => {
      this.logger.warn({ lease: key, reason }, 'lease lost');
      this.metrics.leaseChanges.inc({ change: 'lost' });
      this.lost.add(key);
      this.schedule();
    });
    this.owned.set(key, { lease, runner });
    this.metrics.leaseChanges.inc({ change: 'acquired' });
    this.logger.info({ lease: key }, 'lease acquired');
  }

  private async renewAll(): Promise<void> {
    await Promise.all(
      [...this.owned].map(async ([key, { lease }]) => {
        const sentAt = Date.now();
        try {
          lease.revision = await withTimeout(this.kv.update(key, this.leaseValue(), lease.revision), this.kvTimeoutMs, 'lease renewal');
          lease.deadline = this.deadlineFrom(sentAt);
        } catch (err) {
          const msg = errorText(err);
          if (isWrongLastSequence(err)) {
            // Either an earlier renewal landed after its answer timed out (the key still holds our lease),
            // or the lease expired and may have been taken: then this worker must not act under it any more.
            const adopted = await this.adopt(key).catch(() => undefined);
            if (adopted) {
              Object.assign(lease, adopted);
              return;
            }
            lease.deadline = 0;
            this.lost.add(key);
          }
          this.logger.warn({ lease: key, err: msg }, 'lease renewal failed');
        }
        if (Date.now() >= lease.deadline) this.lost.add(key);
      }),
    );
  }

  private release(key: string): Promise<void> {
    const held = this.owned.get(key);
    if (!held) return Promise.resolve();
    held.releasing ??= (async () => {
      await held.runner.stop();
      // Still listed while the lease is freed: a tick meanwhile must not adopt it again.
      await this.freeLease(key, held.lease);
      this.owned.delete(key);
      this.metrics.leaseChanges.inc({ change: 'released' });
      this.metrics.ownedShards.set(this.held(SHARD_LEASES).length);
      this.logger.info({ lease: key }, 'lease released');
    })();
    return held.releasing;
  }

  /** Deletes the lease key while it holds our lease: a lease another worker holds by now stays. */
  private async freeLease(key: string, lease: Lease): Promise<void> {
    try {
      await withTimeout(this.kv.delete(key, { previousSeq: lease.revision }), this.kvTimeoutMs, 'lease delete');
    } catch (err) {
      // The revision we know may be older than the last write of ours that landed: delete that one.
      const revision = await this.ownRevision(key).catch((readErr: unknown) => {
        this.logger.warn({ lease: key, err: errorText(readErr) }, 'could not read the lease to free it: it expires after the TTL');
        return undefined;
      });
      if (revision === undefined) return;
      await withTimeout(this.kv.delete(key, { previousSeq: revision }), this.kvTimeoutMs, 'lease delete').catch((again: unknown) =>
        this.logger.warn({ lease: key, err: errorText(again), first: errorText(err) }, 'could not free the lease: it expires after the TTL'),
      );
    }
  }
}

/** The coordinator of a worker: shards as its first lease set; a role adds its own with addLeaseSet(). */
export class ShardCoordinator extends LeaseCoordinator {
  constructor(
    kv: KV,
    options: CoordinatorOptions & { shardCount: number; replicas: number },
    startShard: (lease: ShardLease, lost: (reason: string) => void) => ShardRunner,
    logger: Logger,
    metrics: CoordinationMetrics,
  ) {
    super(kv, options, [shardLeases(options.shardCount, startShard)], logger, metrics);
  }

  /** Shards this worker processes (held and not being released). */
  ownedShards(): number[] {
    return this.held(SHARD_LEASES)
      .map(Number)
      .sort((a, b) => a - b);
  }
}

function leaseKey(set: string, name: string): string {
  return `${set}.${name}`;
}

/** Rejects when `promise` takes longer than `ms` (the operation itself may still finish later). */
function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
