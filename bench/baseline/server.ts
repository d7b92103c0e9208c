// NOT PART OF THE PRODUCT. The baseline the benchmark compares Spate with: the capture server a
// Node team would write first — node:http, JSON.parse of the whole body, and one awaited
// JetStream publish per event. Same routes, keys, subjects and streams as Spate, so the
// benchmark's requests and results mean the same thing; nothing else is tuned.
// Prints {"port"} on stdout when listening. Env: NATS_URL, NATS_USER, NATS_PASSWORD, PORT (default 0),
// SHARD_COUNT (16).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connectNats, PROJECTS_BUCKET, shardOf, subjectFor, type ProjectRecord } from '../../lib/index.js';
import { parseBenchArgs } from '../lib/cli.js';

parseBenchArgs(
  `usage: node dist/bench/baseline/server.js

The benchmark's baseline (started by \`npm run bench\`; not part of the product): the capture server
a Node team would write first, node:http with one awaited JetStream publish per event. Prints
{"port":N} on stdout when listening. Environment: NATS_URL (default nats://127.0.0.1:4222),
NATS_USER and NATS_PASSWORD (its credentials), PORT (default 0: any free port), SHARD_COUNT (default 16).

  -h, --help    this text`,
  { options: {} },
);

const shardCount = Number(process.env.SHARD_COUNT ?? 16);
const nc = await connectNats(process.env.NATS_URL ?? 'nats://127.0.0.1:4222', 'bench-baseline', { user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD });
const js = jetstream(nc);

// Project keys, loaded once at start (the benchmark registers its key before starting us).
const projects = new Map<string, ProjectRecord>();
const kv = await new Kvm(nc).open(PROJECTS_BUCKET);
for await (const key of await kv.keys()) {
  const entry = await kv.get(key);
  if (entry?.operation === 'PUT') projects.set(key, entry.json<ProjectRecord>());
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0]!.replace(/\/+$/, '');
  if (req.method !== 'POST' || (path !== '/capture' && path !== '/batch' && path !== '/e')) return send(res, 404, { status: 0 });
  let payload: Record<string, unknown>;
  try {
    payload = JSON.parse(await readBody(req)) as Record<string, unknown>;
  } catch {
    return send(res, 400, { status: 0, error: 'invalid json' });
  }
  const events = (Array.isArray(payload.batch) ? payload.batch : [payload]) as Record<string, unknown>[];
  const token = (payload.api_key ?? payload.token ?? events[0]?.api_key) as string | undefined;
  const project = token ? projects.get(token) : undefined;
  if (!project) return send(res, 401, { status: 0, error: 'invalid api key' });
  const kind = payload.historical_migration === true ? 'historical' : 'events';
  const now = new Date().toISOString();
  for (const e of events) {
    // The client went away (the benchmark's run ended): stop, so leftover work does not slow
    // the next scenario. A first version would not bother; it makes it no faster.
    if (res.destroyed) return;
    const rawId = e.distinct_id ?? (e.properties as Record<string, unknown> | undefined)?.distinct_id;
    const distinctId = typeof rawId === 'string' ? rawId : rawId === undefined || rawId === null ? '' : JSON.stringify(rawId);
    if (!e.event || !distinctId) continue;
    const event = {
      uuid: typeof e.uuid === 'string' ? e.uuid : randomUUID(),
      event: e.event,
      distinct_id: distinctId,
      properties: e.properties ?? {},
      timestamp: e.timestamp ?? now,
      now,
      token,
      project_id: project.projectId,
    };
    await js.publish(subjectFor(kind, project.projectId, shardOf(distinctId, shardCount)), JSON.stringify(event));
  }
  send(res, 200, { status: 1 });
}

const server = createServer((req, res) => {
  handle(req, res).catch(() => {
    if (!res.headersSent && !res.destroyed) send(res, 503, { status: 0 });
  });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  console.log(JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 }));
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    server.close();
    void nc.drain().finally(() => process.exit(0));
  });
}
