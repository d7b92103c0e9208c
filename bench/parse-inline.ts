// `npx tsx bench/parse-inline.ts` — where INLINE_PARSE_MAX_BYTES comes from. Small bodies are
// parsed on the event loop because a hop to a parse thread (transfer the body, run, transfer the
// result back, resolve a promise) costs the event loop more than the parse itself; past some
// size the parse costs more and belongs in a thread (it would also hold up every other request).
// For bodies of several sizes this measures, through the real ParsePool, the event loop's busy
// time per request (event loop utilisation) and requests per second, inline and in threads.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Kvm } from '@nats-io/kv';
import { generateNatsServerAuth, NatsNode } from '../deploy/local/nats-server.js';
import { freePort } from '../deploy/local/ports.js';
import { ParsePool } from '../ingest/pool/index.js';
import { createIngestMetrics } from '../ingest/metrics.js';
import { TokenRegistry } from '../ingest/token-registry.js';
import { connectNats, createLogger, NATS_USERS, PROJECTS_BUCKET } from '../lib/index.js';
import { parseBenchArgs } from './lib/cli.js';
import { markdownTable } from './lib/report.js';
import { batchBody, singleBody } from './lib/payloads.js';

parseBenchArgs(
  `usage: npx tsx bench/parse-inline.ts

Parses bodies of 1 to 400 events through the ingest node's parse pool, inline on the event loop
and in threads (64 in flight, 2 threads), and prints the event loop's busy time per request for
each: where INLINE_PARSE_MAX_BYTES comes from. Starts a private nats-server for the project keys.
Environment: SECONDS, seconds per measurement (default 2).

  -h, --help    this text`,
  { options: {} },
);

const KEY = 'phc_bench';
const SECONDS = Number(process.env.SECONDS ?? 2);
const IN_FLIGHT = 64;

async function measure(pool: ParsePool, body: Uint8Array): Promise<{ perSec: number; loopUs: number }> {
  const meta = { route: 'batch' as const, query: '', contentType: 'application/json', contentEncoding: '', ip: '127.0.0.1', nowMs: Date.now() };
  const run = async (ms: number) => {
    let done = 0;
    const until = performance.now() + ms;
    const lane = async () => {
      while (performance.now() < until) {
        meta.nowMs = Date.now();
        await pool.parse(new Uint8Array(body), meta); // a copy of its own, as ingest reads each body
        done++;
      }
    };
    const elu = performance.eventLoopUtilization();
    const started = performance.now();
    await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
    const busy = performance.eventLoopUtilization(elu);
    return { perSec: done / ((performance.now() - started) / 1000), loopUs: (busy.active * 1000) / done };
  };
  await run(300); // warm-up
  return run(SECONDS * 1000);
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-parse-inline-'));
  const auth = generateNatsServerAuth();
  const nats = new NatsNode({ dir, port: await freePort(), monitorPort: await freePort(), serverName: 'parse-inline', auth });
  await nats.start();
  const nc = await connectNats(nats.url, 'parse-inline', { user: NATS_USERS.operator, pass: auth.passwords.operator });
  const kv = await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1 });
  await kv.put(KEY, JSON.stringify({ projectId: 1, organizationId: 'bench' }));
  const registry = new TokenRegistry(nc, 1, createLogger('bench', 'warn'));
  await registry.start();
  const limits = { maxDecompressedBytes: 100 * 2 ** 20, maxMessageBytes: 2 ** 20, shardCount: 16 };
  const options = { threads: 2, maxHeapBytes: 256 * 2 ** 20, limits, retryAfterSeconds: 1 };
  const inline = new ParsePool({ ...options, inlineMaxBytes: Number.POSITIVE_INFINITY }, registry, createIngestMetrics());
  const threaded = new ParsePool({ ...options, inlineMaxBytes: 0 }, registry, createIngestMetrics());
  const bodies: [string, string][] = [
    ['1 event', singleBody(KEY)],
    ['10 events', batchBody(KEY, 10)],
    ['20 events', batchBody(KEY, 20)],
    ['25 events', batchBody(KEY, 25)],
    ['40 events', batchBody(KEY, 40)],
    ['150 events', batchBody(KEY, 150)],
    ['400 events', batchBody(KEY, 400)],
  ];
  const rows: (string | number)[][] = [];
  try {
    for (const [name, text] of bodies) {
      const body = Buffer.from(text);
      const a = await measure(inline, body);
      const b = await measure(threaded, body);
      rows.push([name, `${(body.length / 1024).toFixed(1)} KiB`, a.loopUs.toFixed(1), b.loopUs.toFixed(1), Math.round(a.perSec), Math.round(b.perSec)]);
      console.error(`${name}: done`);
    }
  } finally {
    await inline.close();
    await threaded.close();
    registry.stop();
    await nc.close();
    await nats.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    markdownTable({
      title: `Parse inline vs in a thread (${IN_FLIGHT} in flight, ${SECONDS}s each, 2 threads)`,
      columns: ['body', 'size', 'event loop µs/request inline', 'event loop µs/request thread', 'requests/s inline', 'requests/s thread'],
      rows,
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
