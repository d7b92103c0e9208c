// An ingest node on a private nats-server, with helpers to register project keys, send
// requests and read back what landed in the streams. For ingest integration tests and others.
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { pino } from 'pino';
import { PROJECTS_BUCKET, parseNdjson, type CapturedEvent, type NatsConnection, type StreamKind, STREAMS } from '../lib/index.js';
import { loadIngestConfig, startIngest, type IngestNode } from '../ingest/index.js';
import { startNats, waitFor, type NatsHandle } from './kit/index.js';

export interface StoredMessage {
  stream: string;
  subject: string;
  seq: number;
  msgId: string | undefined;
  eventCount: number;
  events: CapturedEvent[];
}

export interface IngestHarness extends AsyncDisposable {
  nats: NatsHandle;
  nc: NatsConnection;
  jsm: JetStreamManager;
  kv: KV;
  node: IngestNode;
  url: string;
  registerKey(token: string, projectId?: number): Promise<void>;
  /** Every message of a stream, in order. */
  messages(kind: StreamKind): Promise<StoredMessage[]>;
  /** Every event of a stream, in order. */
  events(kind: StreamKind): Promise<CapturedEvent[]>;
  /** Total messages across the four streams. */
  totalMessages(): Promise<number>;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  stop(): Promise<void>;
}

export const silentLog = pino({ level: 'silent' });

export async function startIngestHarness(env: Record<string, string> = {}, keys: Record<string, number> = {}, natsOptions: { maxPayload?: number } = {}): Promise<IngestHarness> {
  const nats = await startNats(natsOptions);
  const nc = await nats.connect('ingest-test');
  const jsm = await jetstreamManager(nc);
  const kv = await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1 });
  for (const [token, projectId] of Object.entries(keys)) await kv.put(token, JSON.stringify({ projectId, organizationId: 'org-test' }));
  const node = await startIngest(
    loadIngestConfig({ ...nats.env('ingest'), CAPTURE_PORT: '0', PARSE_THREADS: '1', ...env }),
    { log: silentLog },
  );

  const messages = async (kind: StreamKind): Promise<StoredMessage[]> => {
    const info = await retryOnTimeout(() => jsm.streams.info(STREAMS[kind]));
    const out: StoredMessage[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await retryOnTimeout(() => jsm.streams.getMessage(STREAMS[kind], { seq }));
      if (!m) continue;
      out.push({
        stream: STREAMS[kind],
        subject: m.subject,
        seq,
        msgId: m.header?.get('Nats-Msg-Id') || undefined,
        eventCount: Number(m.header?.get('Spate-Events')),
        events: parseNdjson<CapturedEvent>(m.data),
      });
    }
    return out;
  };

  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> => {
    const text = await (await fetch(`${node.url}/metrics`)).text();
    let total = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
      if (!m || m[1] !== name) continue;
      const l = m[2] ?? '';
      if (Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) total += Number(m[3]);
    }
    return total;
  };

  const stop = async () => {
    await node.stop();
    await nc.close();
    await nats.stop();
  };

  return {
    nats,
    nc,
    jsm,
    kv,
    node,
    url: node.url,
    async registerKey(token, projectId = 1) {
      await kv.put(token, JSON.stringify({ projectId, organizationId: 'org-test' }));
      // Accepted once a request with the key stops answering 401.
      await waitFor(`key ${token} accepted`, async () => {
        const res = await fetch(`${node.url}/capture/`, { method: 'POST', body: JSON.stringify({ api_key: token, event: 'probe' }) });
        return res.status === 200;
      });
    },
    messages,
    async events(kind) {
      return (await messages(kind)).flatMap((m) => m.events);
    },
    async totalMessages() {
      let n = 0;
      for (const name of Object.values(STREAMS)) n += (await jsm.streams.info(name)).state.messages;
      return n;
    },
    metric,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** JetStream API calls right after a server restart can time out while it recovers its streams. */
async function retryOnTimeout<T>(call: () => Promise<T>, attempts = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await call();
    } catch (err) {
      if (i >= attempts || (err as Error).name !== 'TimeoutError') throw err;
    }
  }
}

export function post(url: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', body, headers });
}
