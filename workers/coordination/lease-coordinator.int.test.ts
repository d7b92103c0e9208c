// Shard leases against a real NATS KV bucket whose answers come late: on a loaded machine or a
// slow link a write can land in the bucket after the coordinator stopped waiting for its answer.
import { Kvm, type KV } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../lib/index.js';
import { interceptKvCalls, startNats, waitFor } from '../../test/kit/index.js';
import { createCoordinationMetrics } from './metrics.js';
import { LeaseCoordinator, ShardCoordinator, shardLeases, WORKERS_BUCKET, type LeaseSet } from './lease-coordinator.js';

const TTL_MS = 3_000; // KV calls get a third of it (1 s); renewals every 750 ms
const SHARDS = 4;

const cleanups: Array<() => PromiseLike<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The workers' bucket on a fresh nats-server, both gone after the test. */
async function freshBucket(): Promise<KV> {
  const nats = await startNats();
  cleanups.push(() => nats[Symbol.asyncDispose]());
  const nc = await nats.connect('coordinator-test', 'worker');
  cleanups.push(() => nc.close());
  return new Kvm(nc).create(WORKERS_BUCKET, { history: 1, ttl: TTL_MS });
}

/** A coordinator of SHARDS shard leases (doing nothing) and `sets`, stopped after the test. */
function leaseCoordinator(kv: KV, id: string, sets: LeaseSet[]): LeaseCoordinator {
  const c = new LeaseCoordinator(
    kv,
    { workerId: id, ttlMs: TTL_MS },
    [shardLeases(SHARDS, () => ({ stop: () => Promise.resolve() })), ...sets],
    createLogger('coordinator-test', 'silent'),
    createCoordinationMetrics(),
  );
  cleanups.push(() => c.stop());
  return c;
}

/**
 * The real bucket, except that the answer to a chosen call ("<method> <key>") comes `ms` after the
 * call has taken effect; `answerLate` resolves when it has. Counts the calls made and the most
 * lease creates awaiting their answers at once.
 */
function withLateAnswers(kv: KV) {
  const late = new Map<string, { ms: number; landed: () => void }>();
  const made = new Map<string, number>();
  let creating = 0;
  let mostCreating = 0;
  const proxy = interceptKvCalls(kv, async (method, args, run) => {
    const call = `${method} ${String(args[0])}`;
    made.set(call, (made.get(call) ?? 0) + 1);
    const isCreate = method === 'create';
    if (isCreate) mostCreating = Math.max(mostCreating, ++creating);
    try {
      const result = await run();
      const delay = late.get(call);
      if (delay !== undefined) {
        late.delete(call);
        delay.landed();
        await new Promise((r) => setTimeout(r, delay.ms));
      }
      return result;
    } finally {
      if (isCreate) creating--;
    }
  });
  const answerLate = (call: string, ms: number) => new Promise<void>((landed) => late.set(call, { ms, landed }));
  return { kv: proxy, answerLate, calls: (call: string) => made.get(call) ?? 0, mostCreatesAtOnce: () => mostCreating };
}

/**
 * One coordinator over a fresh bucket; `stoppedEarly` lists shards whose processing it stopped before
 * its own stop, `started` every shard whose processing it started, in order.
 */
async function coordinatorWithLateAnswers() {
  const bucket = await freshBucket();
  const { kv, answerLate, calls, mostCreatesAtOnce } = withLateAnswers(bucket);
  const stoppedEarly: number[] = [];
  const started: number[] = [];
  let stopping = false;
  const coordinator = new ShardCoordinator(
    kv,
    { workerId: 'w1', shardCount: SHARDS, ttlMs: TTL_MS, replicas: 1 },
    (lease) => {
      started.push(lease.shard);
      return {
        stop: () => {
          if (!stopping) stoppedEarly.push(lease.shard);
          return Promise.resolve();
        },
      };
    },
    createLogger('coordinator-test', 'silent'),
    createCoordinationMetrics(),
  );
  const stop = async () => {
    stopping = true;
    await coordinator.stop();
  };
  cleanups.push(stop);
  return { coordinator, bucket, answerLate, calls, mostCreatesAtOnce, stoppedEarly, started, stop };
}

async function leaseHolder(bucket: KV, shard: number): Promise<string | undefined> {
  const entry = await bucket.get(`shards.${shard}`);
  return entry?.operation === 'PUT' ? (JSON.parse(entry.string()) as { owner: string }).owner : undefined;
}


describe('shard coordinator', () => {
  it('coordinator - a renewal answered after its timeout keeps the shard: no lapse, no release', async () => {
    const { coordinator, answerLate, calls, stoppedEarly } = await coordinatorWithLateAnswers();
    await coordinator.start();
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);

    await answerLate('update shards.2', 1_500);
    const late = calls('update shards.2');
    // It times out after 1 s; the next renewal names the revision before it and is refused, the
    // lease is written over the revision found, and renewals go on from there.
    await waitFor('three renewals after the late one', () => calls('update shards.2') >= late + 3, 15_000, 20);
    expect(stoppedEarly).toEqual([]);
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);
  });

  it('coordinator - a lease whose create was answered after its timeout is taken up at once, not after the TTL', async () => {
    const { coordinator, bucket, answerLate } = await coordinatorWithLateAnswers();
    const landed = answerLate('create shards.1', 1_500);
    await coordinator.start();
    await landed;
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);
    expect(await leaseHolder(bucket, 1)).toBe('w1');
  });

  it('coordinator - leaving frees a lease whose last renewal was answered late', async () => {
    const { coordinator, bucket, answerLate, stop } = await coordinatorWithLateAnswers();
    await coordinator.start();
    await answerLate('update shards.3', 60_000);
    // Leaving now waits for the renewal in flight to time out, then frees every lease.
    await stop();
    for (let shard = 0; shard < SHARDS; shard++) expect(await leaseHolder(bucket, shard)).toBeUndefined();
  });

  it('coordinator - a clean leave is taken over at once while listing the members fails', async () => {
    const bucket = await freshBucket();
    let listingFails = false;
    // b's listings hang (a loaded NATS) once both workers share the shards.
    const slowListing = interceptKvCalls(bucket, (method, _args, run) => (method === 'keys' && listingFails ? new Promise(() => undefined) : run()));
    const coordinator = (id: string, kv: KV) => {
      const c = new ShardCoordinator(
        kv,
        { workerId: id, shardCount: SHARDS, ttlMs: TTL_MS, replicas: 1 },
        () => ({ stop: () => Promise.resolve() }),
        createLogger('coordinator-test', 'silent'),
        createCoordinationMetrics(),
      );
      cleanups.push(() => c.stop());
      return c;
    };
    const a = coordinator('a', bucket);
    const b = coordinator('b', slowListing);
    await a.start();
    await b.start();
    await waitFor('a and b to share the shards', () => a.ownedShards().length === 2 && b.ownedShards().length === 2, 10_000, 20);

    listingFails = true;
    await a.stop();
    // a deleted its membership and its leases; b saw the membership go in its watch.
    await waitFor('b to take over every shard', () => b.ownedShards().length === SHARDS, 2_000, 20);
  });

  it('coordinator - a bucket change during the first round does not start a second one beside it: each shard is started once', async () => {
    const { coordinator, bucket, answerLate, started } = await coordinatorWithLateAnswers();
    // The first round waits on shard 0's lease (written, answer late); a change in the bucket meanwhile
    // asks for another round. Run beside the first, it found shard 0 leased by this very process and
    // started it a second time (2026-11-25 CI: each copy raised the fence over the other's).
    const landed = answerLate('create shards.0', 800);
    const starting = coordinator.start();
    await landed;
    await bucket.delete('shards.99');
    await starting;
    // A renewal of shard 0's lease: the rounds asked for meanwhile have run.
    const revision = (await bucket.get('shards.0'))!.revision;
    await waitFor('a later round', async () => (await bucket.get('shards.0'))!.revision !== revision, 3_000, 20);
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);
    expect([...started].sort()).toEqual([0, 1, 2, 3]);
  });

  it('coordinator - takes over many shards at once, not one round trip after another', async () => {
    const { coordinator, answerLate, mostCreatesAtOnce } = await coordinatorWithLateAnswers();
    for (let shard = 0; shard < SHARDS; shard++) void answerLate(`create shards.${shard}`, 300);
    await coordinator.start();
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);
    expect(mostCreatesAtOnce()).toBe(SHARDS);
  });
});

describe('lease sets', () => {
  it('lease sets - a role\'s named leases (export.<id>) are each held by one worker at a time, spread like shards, and move when their holder leaves', async () => {
    const bucket = await freshBucket();
    let exportIds = ['e1', 'e2', 'e3', 'e4'];
    const running = new Map<string, string>(); // export id → the worker running it
    const coordinator = (id: string) => {
      const exports: LeaseSet = {
        set: 'export',
        names: () => exportIds,
        start: (lease) => {
          expect(running.get(lease.name), `export ${lease.name} started twice`).toBeUndefined();
          running.set(lease.name, id);
          return { stop: () => Promise.resolve(void running.delete(lease.name)) };
        },
      };
      return leaseCoordinator(bucket, id, [exports]);
    };
    const a = coordinator('a');
    const b = coordinator('b');
    await a.start();
    await b.start();
    await waitFor('a and b to share the exports', () => a.held('export').length === 2 && b.held('export').length === 2, 10_000, 20);
    expect([...a.held('export'), ...b.held('export')].sort()).toEqual(exportIds);
    expect(a.held('shards')).toHaveLength(2);
    const holder = async (key: string) => {
      const entry = await bucket.get(key);
      return entry?.operation === 'PUT' ? (JSON.parse(entry.string()) as { owner: string }).owner : undefined;
    };
    for (const id of exportIds) expect(await holder(`export.${id}`)).toBe(running.get(id));

    // An export created: a refresh takes it up without waiting for the next round.
    exportIds = [...exportIds, 'e5'];
    a.refresh();
    b.refresh();
    await waitFor('e5 running', () => running.has('e5'), 2_000, 20);
    expect(a.held('export').length + b.held('export').length).toBe(5);

    await a.stop();
    await waitFor('b to run every export', () => b.held('export').length === 5, 3_000, 20);
    expect([...running.values()]).toEqual(['b', 'b', 'b', 'b', 'b']);
  });
});

describe('rounds', () => {
  it('coordinator - renewing an opt-in set\'s holder key starts no round: listings stay at the renewal pace', async () => {
    const bucket = await freshBucket();
    let listings = 0;
    const counted = interceptKvCalls(bucket, (method, _args, run) => {
      if (method === 'keys') listings++;
      return run();
    });
    const coordinator = (id: string) => {
      const exports: LeaseSet = { set: 'export', optIn: true, names: () => ['e1', 'e2'], start: () => ({ stop: () => Promise.resolve() }) };
      return leaseCoordinator(counted, id, [exports]);
    };
    const a = coordinator('a');
    const b = coordinator('b');
    await a.start();
    await b.start();
    await waitFor('a and b to share the exports', () => a.held('export').length === 1 && b.held('export').length === 1, 10_000, 20);
    listings = 0;
    await new Promise((r) => setTimeout(r, 3_000));
    // Two workers renewing every 750 ms, each round listing members and the set's holders: ~16 in
    // 3 s. Each renewal of `holds.export.<id>` used to start the next round at once: hundreds.
    expect(listings).toBeLessThanOrEqual(30);
    // Still spread over both, and a holder that leaves is noticed.
    await b.stop();
    await waitFor('a to hold both exports', () => a.held('export').length === 2, 3_000, 20);
  });
});
