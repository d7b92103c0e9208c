// `npx tsx bench/nats-dedup-memory.ts` — what one message id in a JetStream duplicate window costs
// the NATS server in memory: where the default of PROJECT_HISTORICAL_MESSAGES_PER_SECOND comes
// from. HISTORICAL keeps a 1-hour window (STREAM_HISTORICAL_DUPLICATE_WINDOW), and the server holds
// every id of the window in memory, so a project's historical message rate bounds that memory.
//
// Two private nats-servers each take the same number of tiny messages into a stream with a
// 1-hour duplicate window: one with a distinct historical-style id per message (`u:` + 27
// characters), one without ids. The difference in resident memory, per message, is the id's cost.
import { execFileSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { generateNatsServerAuth, NatsNode } from '../deploy/local/nats-server.js';
import { freePort } from '../deploy/local/ports.js';
import { connectNats, NATS_USERS } from '../lib/index.js';
import { parseBenchArgs } from './lib/cli.js';
import { markdownTable } from './lib/report.js';

parseBenchArgs(
  `usage: npx tsx bench/nats-dedup-memory.ts

Publishes MESSAGES tiny messages (default 300000) into a stream with a 1-hour duplicate window on
two private nats-servers, with and without a distinct Nats-Msg-Id each, and prints the server's
resident memory per message id. Adds the run to bench/results/<date>-nats-dedup-memory.md.

  -h, --help    this text`,
  { options: {} },
);

const MESSAGES = Number(process.env.MESSAGES ?? 300_000);
const IN_FLIGHT = 2_000;

async function rss(monitorPort: number): Promise<number> {
  const varz = (await (await fetch(`http://127.0.0.1:${monitorPort}/varz`)).json()) as { mem: number };
  return varz.mem;
}

async function measure(withIds: boolean): Promise<{ before: number; after: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-dedup-bench-'));
  const monitorPort = await freePort();
  const auth = generateNatsServerAuth();
  const node = new NatsNode({ dir, port: await freePort(), monitorPort, serverName: 'dedup-bench', auth });
  await node.start();
  try {
    const nc = await connectNats(node.url, 'dedup-bench', { user: NATS_USERS.operator, pass: auth.passwords.operator });
    await (await jetstreamManager(nc)).streams.add({ name: 'DEDUP', subjects: ['dedup.>'], duplicate_window: 3_600_000 * 1_000_000 });
    const js = jetstream(nc);
    const payload = new TextEncoder().encode('{}');
    // Settle the server's heap before the baseline.
    for (let i = 0; i < 1_000; i++) await js.publish('dedup.warm', payload);
    await new Promise((r) => setTimeout(r, 1_000));
    const before = await rss(monitorPort);
    const pending = new Set<Promise<unknown>>();
    for (let i = 0; i < MESSAGES; i++) {
      const h = headers();
      if (withIds) h.set('Nats-Msg-Id', `u:${String(i).padStart(27, 'x')}`);
      const p = js.publish(`dedup.${i % 16}`, payload, { headers: h });
      pending.add(p);
      void p.finally(() => pending.delete(p));
      if (pending.size >= IN_FLIGHT) await Promise.race(pending);
    }
    await Promise.all(pending);
    await new Promise((r) => setTimeout(r, 1_000));
    const after = await rss(monitorPort);
    await nc.close();
    return { before, after };
  } finally {
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const withIds = await measure(true);
const withoutIds = await measure(false);
const growth = (m: { before: number; after: number }) => m.after - m.before;
const perId = (growth(withIds) - growth(withoutIds)) / MESSAGES;
const MiB = 1024 * 1024;
const table = markdownTable({
  title: 'Messages into a stream with a 1-hour duplicate window',
  columns: ['messages', 'count', 'server RSS growth (MiB)'],
  rows: [
    ['with a distinct Nats-Msg-Id each', MESSAGES, growth(withIds) / MiB],
    ['without Nats-Msg-Id', MESSAGES, growth(withoutIds) / MiB],
  ],
});
const report = `${table}\n\nOne message id in the window: ~${Math.round(perId)} bytes of the NATS server's memory.\n`;
console.log(report);
// One file a day; each run adds its section, so runs of different sizes sit side by side.
const file = `bench/results/${new Date().toISOString().slice(0, 10)}-nats-dedup-memory.md`;
const server = execFileSync(process.env.NATS_SERVER_BIN ?? 'nats-server', ['--version']).toString().trim();
if (!existsSync(file)) writeFileSync(file, '# NATS duplicate-window memory per message id\n');
appendFileSync(file, `\n## ${new Date().toISOString()}: MESSAGES=${MESSAGES}, ${server}\n\n\`npx tsx bench/nats-dedup-memory.ts\`\n\n${report}`);
console.log(`written: ${file}`);
