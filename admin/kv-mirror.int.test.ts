// KvMirror against a real bucket whose writes can be made to land late: a write whose request
// timed out but that the server applies after newer syncs must not bring back a revoked token.
import { JetStreamApiError } from '@nats-io/jetstream';
import { KvWatchInclude, type KV } from '@nats-io/kv';
import { TimeoutError } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../lib/index.js';
import { DEFAULT_LIMITS, startAdminFixture, type AdminFixture, type TestUser } from '../test/admin/harness.js';
import { interceptKvCalls, waitFor } from '../test/kit/index.js';
import { KvMirror, type MirrorSpec } from './kv-mirror.js';
import { projectLimitSettings } from './config.js';
import { projectsMirror } from './projects-kv.js';

let f: AdminFixture;
let owner: TestUser;

beforeAll(async () => {
  f = await startAdminFixture();
  owner = await f.newUser('owner@mirror.example');
});
afterAll(async () => f?.stop());

const WRITES = new Set(['put', 'create', 'update', 'delete', 'purge']);

/**
 * Wraps a bucket so chosen writes of a key behave as on a slow server:
 * - `late(key)`: the next write times out for its caller and reaches the server only on `land()`;
 * - `before(key, fn)`: the next write waits for `fn` (someone else writing first).
 */
function withLateWrites(kv: KV) {
  let late: { key: string; land?: () => Promise<unknown> } | undefined;
  let before: { key: string; fn: () => Promise<unknown> } | undefined;
  const proxy = interceptKvCalls(kv, (method, args, call) => {
    if (!WRITES.has(method)) return call();
    if (late && !late.land && args[0] === late.key) {
      late.land = call;
      return Promise.reject(new TimeoutError());
    }
    if (before && args[0] === before.key) {
      const { fn } = before;
      before = undefined;
      return fn().then(call);
    }
    return call();
  });
  return {
    kv: proxy,
    late: (key: string) => {
      late = { key };
      /** Lets the held write reach the server now; its outcome, or the error that refused it. */
      return async (): Promise<unknown> => {
        if (!late?.land) throw new Error(`no write of ${key} was held`);
        return late.land().catch((err: unknown) => err);
      };
    },
    before: (key: string, fn: () => Promise<unknown>) => (before = { key, fn }),
  };
}

async function kvValue(token: string): Promise<unknown> {
  const entry = await (await f.kv()).get(token);
  return entry?.operation === 'PUT' ? entry.json() : undefined;
}

/** Replica B: a second mirror of the projects bucket, over a wrapped bucket and a spy on its reads. */
async function replicaB(onLoadAll: () => Promise<unknown> = () => Promise.resolve()) {
  const wrapped = withLateWrites(await f.kv());
  const loaded: string[] = [];
  const projects = projectsMirror(projectLimitSettings(f.config));
  const spec: MirrorSpec = {
    ...projects,
    load: async (pool, keys) => {
      loaded.push(...keys);
      return projects.load(pool, keys);
    },
    loadAll: async (pool) => {
      const rows = await projects.loadAll(pool);
      await onLoadAll();
      return rows;
    },
  };
  const mirror = new KvMirror(wrapped.kv, spec, f.db, createLogger('replica-b', 'silent'));
  return { mirror, loaded, ...wrapped };
}

async function newProject(name: string): Promise<{ id: number; api_token: string }> {
  const res = await f.api('POST', `/api/organizations/${owner.organizationId}/projects/`, { key: owner.key, body: { name } });
  expect(res.status).toBe(201);
  return res.body;
}

describe('kv mirror', () => {
  it.each(['change notice', 'next reconcile'] as const)(
    'kv mirror - a stale put that times out and lands after the token was revoked is refused (fenced by the %s)',
    async (fence) => {
      const project = await newProject(`Late ${fence}`);
      const token = project.api_token;
      expect(await kvValue(token)).toEqual({ projectId: project.id, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });

      // B's full reconcile reads PostgreSQL; then the project is deleted through replica A, which
      // removes the token from the bucket before answering. B still wants the token.
      let deleted = false;
      const b = await replicaB(async () => {
        if (deleted) return;
        deleted = true;
        expect((await f.api('DELETE', `/api/projects/${project.id}/`, { key: owner.key })).status).toBe(204);
      });
      if (fence === 'change notice') await b.mirror.follow(f.databaseUrl, 3_600_000);
      const watch = await (await f.kv()).watch({ key: token, include: KvWatchInclude.UpdatesOnly });
      const seen: string[] = [];
      void (async () => {
        for await (const e of watch) seen.push(e.operation);
      })();
      try {
        const land = b.late(token);
        // B's put of the token times out: it is still on its way.
        expect((await b.mirror.reconcile()).failed).toBe(1);
        expect(await kvValue(token)).toBeUndefined();
        if (fence === 'change notice') {
          // B's sync on the deletion's notice reads PostgreSQL (no token) and the bucket (no token).
          await waitFor('replica B synced the notice', () => b.loaded.includes(token), 2_000, 5);
          await b.mirror.syncStrict([]); // runs after that sync
        } else {
          await b.mirror.reconcile(); // the retry a failed write schedules
        }

        // The late put reaches the server now: it is refused, and the token stays revoked.
        const outcome = await land();
        expect(await kvValue(token)).toBeUndefined();
        await new Promise((r) => setTimeout(r, 100));
        expect(seen).not.toContain('PUT');
        expect(outcome).toBeInstanceOf(JetStreamApiError);
        expect(String(outcome)).toMatch(/wrong last sequence/);
      } finally {
        watch.stop();
        await b.mirror.stop();
      }
    },
  );

  it('kv mirror - a write refused because the key changed since it was read reads PostgreSQL and the bucket again', async () => {
    // A project made long ago: replica A has no sync of it under way that could fix the key first.
    const token = owner.projectApiKey;
    const kv = await f.kv();
    await kv.put(token, JSON.stringify({ projectId: 1, organizationId: 'wrong' }));
    const b = await replicaB();
    try {
      // Someone else writes the key between B's read and B's write.
      let raced = false;
      b.before(token, async () => {
        raced = true;
        await kv.put(token, JSON.stringify({ projectId: 2, organizationId: 'also wrong' }));
      });
      await b.mirror.syncStrict([token]);
      expect(raced).toBe(true);
      expect(await kvValue(token)).toEqual({ projectId: owner.projectId, organizationId: owner.organizationId, limits: DEFAULT_LIMITS });
      // A second sync finds the bucket right and writes nothing.
      const revision = (await kv.get(token))?.revision;
      await b.mirror.syncStrict([token]);
      expect((await kv.get(token))?.revision).toBe(revision);
    } finally {
      await b.mirror.stop();
    }
  });
});
