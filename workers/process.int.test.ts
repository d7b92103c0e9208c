// Real worker processes (workers/main through tsx) sharing shards through NATS KV leases.
import { Kvm } from '@nats-io/kv';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { CapturedEvent } from '../lib/index.js';
import { freshDatabase, startNats, waitFor } from '../test/kit/index.js';
import {
  capture,
  connectAndCreateStreams,
  publishEvents,
  readProcessed,
  spawnWorker,
  waitForCommitted,
  workerEnv,
  type WorkerProcess,
} from '../test/workers/harness.js';
import { assignShards } from './coordination/assignment.js';
import { WORKERS_BUCKET } from './coordination/lease-coordinator.js';

const running: WorkerProcess[] = [];

afterEach(async () => {
  for (const w of running.splice(0)) {
    if (w.child.exitCode === null && w.child.signalCode === null) {
      w.kill('SIGKILL');
      await w.exited;
    }
  }
});

async function start(id: string, env: Record<string, string>): Promise<WorkerProcess> {
  const w = await spawnWorker(id, env);
  running.push(w);
  return w;
}

/**
 * Waits until the given workers own exactly the shards the assignment gives them (so every shard, none twice).
 * Any full cover is not enough: while one worker has yet to see a join, the others may already have handed
 * shards to the newcomer, and 4 + 4 + 8 covers 16 shards on the way to 5 + 5 + 6.
 */
async function waitForCover(workers: WorkerProcess[], what: string, timeoutMs = 30_000): Promise<number[][]> {
  const planned = assignShards(workers.map((w) => w.id), 16);
  const expected = workers.map((w) => JSON.stringify(planned.get(w.id)));
  let last: number[][] = [];
  try {
    await waitFor(
      what,
      async () => {
        last = await Promise.all(workers.map(async (w) => (await w.shards()) ?? []));
        return last.every((s, i) => JSON.stringify(s) === expected[i]);
      },
      timeoutMs,
      200,
    );
  } catch (err) {
    const logs = workers.map((w) => `--- ${w.id}\n${w.output().slice(-3000)}`).join('\n');
    throw new Error(`${(err as Error).message}; last seen ${JSON.stringify(last)}, planned ${JSON.stringify(expected)}\n${logs}`);
  }
  return last;
}

function events(projectId: number, count: number, ids: number): CapturedEvent[] {
  const out: CapturedEvent[] = [];
  for (let i = 0; i < count; i++) out.push(capture(projectId, `e${i % 7}`, `user-${i % ids}`, { i }));
  return out;
}

async function expectExactlyOnce(nc: Parameters<typeof readProcessed>[0], sent: CapturedEvent[], timeoutMs = 60_000): Promise<void> {
  let lines = await readProcessed(nc);
  await waitFor(
    `${sent.length} processed events`,
    async () => {
      lines = await readProcessed(nc);
      return lines.length >= sent.length;
    },
    timeoutMs,
    250,
  );
  // Give a stray duplicate (if any) the chance to show up before counting.
  await new Promise((r) => setTimeout(r, 500));
  lines = await readProcessed(nc);
  const counts = new Map<string, number>();
  for (const l of lines) counts.set(l.uuid, (counts.get(l.uuid) ?? 0) + 1);
  const missing = sent.filter((e) => !counts.has(e.uuid));
  const twice = [...counts].filter(([, n]) => n > 1);
  expect(missing).toEqual([]);
  expect(twice).toEqual([]);
  expect(lines).toHaveLength(sent.length);
}

describe('worker processes', () => {
  it('workers - two then three processes share 16 shards without overlap, and rebalance when one leaves', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    // A TTL far above the hand-over time allowed below: leases left to expire could not pass for a clean leave.
    // At info level, a failure shows each worker's membership changes, acquisitions and releases with their times.
    const env = { ...workerEnv(nats.url, await freshDatabase()), WORKER_LEASE_TTL: '10s', LOG_LEVEL: 'info' };
    const sent = events(1, 2_000, 97);
    await publishEvents(js, sent.slice(0, 1_000));

    const a = await start('wa', env);
    const b = await start('wb', env);
    const two = await waitForCover([a, b], 'two workers to share the shards');
    expect(two.map((s) => s.length).sort()).toEqual([8, 8]);

    const c = await start('wc', env);
    // The clock starts when the newcomer announces itself, not when its process starts: start-up
    // (migrations, connections; tsx compiling under tests) takes seconds on a loaded host.
    const workers = await new Kvm(nc).open(WORKERS_BUCKET);
    await waitFor('the third worker to announce itself', async () => (await workers.get('members.wc'))?.operation === 'PUT', 60_000, 50);
    const joinedAt = Date.now();
    const three = await waitForCover([a, b, c], 'three workers to share the shards');
    expect(three.map((s) => s.length).sort()).toEqual([5, 5, 6]);
    const joinMs = Date.now() - joinedAt;
    expect(joinMs, `the join took ${joinMs} ms`).toBeLessThan(5_000);

    await publishEvents(js, sent.slice(1_000));
    a.kill('SIGTERM');
    expect(await a.exited).toBe(0);
    const leftAt = Date.now();
    // A clean leave deletes its leases before exiting: none is left for the TTL to expire.
    const leftBehind: string[] = [];
    for await (const key of await workers.keys('shards.*')) {
      const entry = await workers.get(key);
      if (entry?.operation === 'PUT' && (JSON.parse(entry.string()) as { owner: string }).owner === 'wa') leftBehind.push(key);
    }
    expect(leftBehind).toEqual([]);
    const after = await waitForCover([b, c], 'two workers to take the leaver\'s shards');
    expect(after.map((s) => s.length).sort()).toEqual([8, 8]);
    // So the others take them over at once.
    const handOverMs = Date.now() - leftAt;
    expect(handOverMs, `hand-over took ${handOverMs} ms\n${[a, b, c].map((w) => `--- ${w.id}\n${w.output().slice(-4000)}`).join('\n')}`).toBeLessThan(5_000);

    await expectExactlyOnce(nc, sent);
    await nc.close();
  });

  it('workers - kill -9 between publish and commit: its shards resume elsewhere, nothing lost, nothing processed twice', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const databaseUrl = await freshDatabase();
    const env = workerEnv(nats.url, databaseUrl);
    const victim = await start('victim', { ...env, SPATE_TEST_FAULT: 'kill-after-publish:4' });
    const survivor = await start('survivor', env);
    await waitForCover([victim, survivor], 'two workers to share the shards');

    const sent = events(2, 12_000, 211);
    await publishEvents(js, sent, { perMessage: 20 });
    await victim.exited;
    expect(victim.child.signalCode).toBe('SIGKILL');

    await waitFor('the survivor to own every shard', async () => (await survivor.shards())?.length === 16, 20_000, 200);
    await expectExactlyOnce(nc, sent);

    // The survivor replayed the victim's planned batch under the same message ids: JetStream dropped them.
    const metrics = await (await fetch(`${await survivor.statusUrl()}/metrics`)).text();
    const duplicates = Number(/spate_worker_publish_duplicates_total\{[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0);
    expect(duplicates).toBeGreaterThan(0);

    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    await waitForCommitted(db, sent);
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM persons WHERE project_id = 2');
    expect(rows[0]!.n).toBe(211);
    await db.end();
    await nc.close();
  });
});
