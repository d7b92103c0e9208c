// Shard leases against a real NATS KV bucket whose answers come late: on a loaded machine or a
// slow link a write can land in the bucket after the coordinator stopped waiting for its answer.
import { Kvm, type KV } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../lib/index.js';
import { connectNats } from '../lib/nats.js';
import { startNats } from '../test/kit/index.js';
import { createWorkerMetrics } from './metrics.js';
import { ShardCoordinator, WORKERS_BUCKET } from './shard-coordinator.js';

const TTL_MS = 3_000; // KV calls get a third of it (1 s); renewals every 750 ms
const SHARDS = 4;

const cleanups: Array<() => PromiseLike<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * The real bucket, except that the answer to a chosen call ("<method> <key>") comes `ms` after the
 * call has taken effect; `answerLate` resolves when it has.
 */
function withLateAnswers(kv: KV) {
  const late = new Map<string, { ms: number; landed: () => void }>();
  const proxy = new Proxy(kv, {
    get(target, prop) {
      const real = Reflect.get(target, prop, target) as unknown;
      if (typeof real !== 'function') return real;
      return async (...args: unknown[]) => {
        const result: unknown = await (real as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        const call = `${String(prop)} ${String(args[0])}`;
        const delay = late.get(call);
        if (delay !== undefined) {
          late.delete(call);
          delay.landed();
          await new Promise((r) => setTimeout(r, delay.ms));
        }
        return result;
      };
    },
  });
  const answerLate = (call: string, ms: number) => new Promise<void>((landed) => late.set(call, { ms, landed }));
  return { kv: proxy, answerLate };
}

/** One coordinator over a fresh bucket; `stoppedEarly` lists shards whose processing it stopped before its own stop. */
async function coordinatorWithLateAnswers() {
  const nats = await startNats();
  cleanups.push(() => nats[Symbol.asyncDispose]());
  const nc = await connectNats(nats.url, 'coordinator-test');
  cleanups.push(() => nc.close());
  const bucket = await new Kvm(nc).create(WORKERS_BUCKET, { history: 1, ttl: TTL_MS });
  const { kv, answerLate } = withLateAnswers(bucket);
  const stoppedEarly: number[] = [];
  let stopping = false;
  const coordinator = new ShardCoordinator(
    kv,
    { workerId: 'w1', shardCount: SHARDS, ttlMs: TTL_MS, replicas: 1 },
    (lease) => ({
      stop: () => {
        if (!stopping) stoppedEarly.push(lease.shard);
        return Promise.resolve();
      },
    }),
    createLogger('coordinator-test', 'silent'),
    createWorkerMetrics(),
  );
  const stop = async () => {
    stopping = true;
    await coordinator.stop();
  };
  cleanups.push(stop);
  return { coordinator, bucket, answerLate, stoppedEarly, stop };
}

async function leaseHolder(bucket: KV, shard: number): Promise<string | undefined> {
  const entry = await bucket.get(`shards.${shard}`);
  return entry?.operation === 'PUT' ? (JSON.parse(entry.string()) as { owner: string }).owner : undefined;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('shard coordinator', () => {
  it('coordinator - a renewal answered after its timeout keeps the shard: no lapse, no release', async () => {
    const { coordinator, answerLate, stoppedEarly } = await coordinatorWithLateAnswers();
    await coordinator.start();
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);

    await answerLate('update shards.2', 1_500);
    // The renewal times out after 1 s; the next one names the revision before it and is refused.
    await sleep(2_500);
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

  it('coordinator - takes over many shards in about one round trip, not one per shard', async () => {
    const { coordinator, answerLate } = await coordinatorWithLateAnswers();
    for (let shard = 0; shard < SHARDS; shard++) void answerLate(`create shards.${shard}`, 900);
    const started = Date.now();
    await coordinator.start();
    expect(coordinator.ownedShards()).toEqual([0, 1, 2, 3]);
    // One after another: at least 4 × 900 ms.
    expect(Date.now() - started).toBeLessThan(2_700);
  });
});
