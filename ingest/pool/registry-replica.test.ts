import { BroadcastChannel } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { CaptureError, captureErrorResponse } from '../errors.js';
import { createIngestMetrics } from '../metrics.js';
import { ParsePool } from './parse-pool.js';
import { RegistryReplica, type ReplicaMessage } from './registry-replica.js';
import type { TokenRegistry } from '../token-registry.js';

const record = { projectId: 3, organizationId: 'o' };

describe('registry replica', () => {
  it('registry replica - a copy that does not catch up in time is 503 unavailable with Retry-After, not a 500', async () => {
    const replica = new RegistryReplica(`replica-test-${process.pid}-a`, { retryAfterSeconds: 7, waitMs: 50 });
    try {
      const err = await replica.atLeast(1).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(CaptureError);
      const answer = captureErrorResponse(err);
      expect(answer.status).toBe(503);
      expect(answer.body.code).toBe('unavailable');
      expect(answer.headers).toEqual({ 'Retry-After': '7' });
    } finally {
      replica.close();
    }
  });

  it('registry replica - resolves once a snapshot at least as new arrives, and looks keys up in it', async () => {
    const name = `replica-test-${process.pid}-b`;
    const main = new BroadcastChannel(name);
    const replica = new RegistryReplica(name, { retryAfterSeconds: 1, waitMs: 5_000 });
    try {
      const waiting = replica.atLeast(2);
      const send = (version: number) => main.postMessage({ type: 'snapshot', snapshot: { version, entries: [['phc_k', record]] } } satisfies ReplicaMessage);
      send(1);
      send(2);
      await waiting;
      expect(replica.lookup('phc_k')).toEqual(record);
      await replica.atLeast(1); // already newer: at once
    } finally {
      replica.close();
      main.close();
    }
  });

  it('registry replica - through the parse pool, a lagging thread answers 503 unavailable with Retry-After', async () => {
    // A registry the threads never catch up with: it is at v2, its snapshots say v1.
    const registry = {
      currentVersion: 2,
      lookup: () => record,
      onChange: () => undefined,
      snapshot: () => ({ version: 1, entries: [['phc_k', record]] }),
    } as unknown as TokenRegistry;
    const pool = new ParsePool(
      { threads: 1, maxHeapBytes: 64 * 1024 * 1024, inlineMaxBytes: 0, limits: { maxDecompressedBytes: 1 << 20, maxMessageBytes: 1 << 20, shardCount: 16 }, retryAfterSeconds: 3 },
      registry,
      createIngestMetrics(),
    );
    try {
      const body = Buffer.from(JSON.stringify({ api_key: 'phc_k', event: 'e', distinct_id: 'd' }));
      const meta = { route: 'capture' as const, query: '', contentType: 'application/json', contentEncoding: '', ip: undefined, nowMs: Date.now() };
      const err = await Promise.resolve(pool.parse(body, meta)).then(() => undefined, (e: unknown) => e);
      const answer = captureErrorResponse(err);
      expect(answer.status).toBe(503);
      expect(answer.body.code).toBe('unavailable');
      expect(answer.headers).toEqual({ 'Retry-After': '3' });
    } finally {
      await pool.close();
    }
  }, 20_000);
});
