// What the capture, latency and import stages measure against: a private nats-server, one
// ingest node (a separate process from the load generator, as in production), the trivial uWS
// ceiling and the baseline server.
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { generateNatsServerAuth, NatsNode } from '../../deploy/local/nats-server.js';
import { freePort } from '../../deploy/local/ports.js';
import { waitFor } from '../../deploy/local/wait.js';
import { connectNats, NATS_USERS, PROJECTS_BUCKET, STREAMS, type NatsAuth } from '../../lib/index.js';
import { cpuSeconds, startBaseline, startNodeProcess, startTrivialUws } from './processes.js';

export const BENCH_KEY = 'phc_bench';

export interface CaptureRig {
  natsUrl: string;
  /** The operator's credentials. */
  natsAuth: NatsAuth;
  captureUrl: string;
  trivialUrl: string;
  /** Changes when the baseline is restarted. */
  readonly baselineUrl: string;
  ingestPid: number;
  trivialPid: number;
  natsPid: number | undefined;
  /** Empties every stream, so that each measurement starts from the same broker state. */
  purge(): Promise<void>;
  /**
   * A key of a project no earlier measurement used, once the ingest node accepts it. HISTORICAL
   * message ids derive from project, shard and uuids, and a purge does not clear the stream's
   * duplicate window (1 h): importing the same file again under the same project would be
   * answered as duplicates, not stored, and measure something else than the first run.
   */
  freshProjectKey(): Promise<string>;
  /**
   * Waits (at most maxS) until the servers are idle: a measurement must not start while the
   * previous one's leftovers (an aborted import's bodies, a 20 MB backlog) still use the CPU.
   */
  quiet(): Promise<void>;
  /**
   * Kills the baseline and starts a fresh one: after 20 MB bodies it keeps publishing them
   * event by event for minutes after the load stopped, and would load every later measurement.
   */
  restartBaseline(): Promise<void>;
  stop(): Promise<void>;
}

/** quietMaxS: how long quiet() waits at most (a quick run cannot afford to wait long). */
export async function startCaptureRig(dir: string, o: { quietMaxS: number; signal?: AbortSignal }): Promise<CaptureRig> {
  const { signal } = o;
  // Stopped together, then the NATS connection and server (started first).
  const started: { stop(): Promise<void> }[] = [];
  const stop = async () => {
    const [natsServer, connection, ...servers] = started.splice(0);
    await Promise.all(servers.map((p) => p.stop().catch(() => undefined)));
    await connection?.stop().catch(() => undefined);
    await natsServer?.stop().catch(() => undefined);
  };
  try {
    const auth = generateNatsServerAuth();
    const operator = { user: NATS_USERS.operator, pass: auth.passwords.operator };
    const nats = new NatsNode({ dir, port: await freePort(), monitorPort: await freePort(), serverName: 'bench', auth });
    started.push(nats);
    await nats.start();
    const nc = await connectNats(nats.url, 'bench', operator);
    started.push({ stop: () => nc.close() });
    const kv = await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1 });
    await kv.put(BENCH_KEY, JSON.stringify({ projectId: 1, organizationId: 'bench' }));
    const jsm = await jetstreamManager(nc);
    let projects = 1;
    signal?.throwIfAborted();

    const capturePort = await freePort();
    const ingest = startNodeProcess(import.meta.url, '../../ingest/main', { NATS_URL: nats.url, NATS_USER: NATS_USERS.ingest, NATS_PASSWORD: auth.passwords.ingest, CAPTURE_PORT: String(capturePort), LOG_LEVEL: 'warn' });
    started.push(ingest);
    const captureUrl = `http://127.0.0.1:${capturePort}`;
    await waitFor('ingest node', async () => (await fetch(`${captureUrl}/_ready`).catch(() => undefined))?.ok === true, 60_000);
    signal?.throwIfAborted();
    const trivial = await startTrivialUws();
    started.push(trivial);
    let baseline = await startBaseline(nats.url, operator); // after the ingest node created the streams
    started.push({ stop: () => baseline.stop() });

    const cpuOf = () => cpuSeconds(ingest.pid, trivial.pid, baseline.pid, nats.pid);
    return {
      natsUrl: nats.url,
      natsAuth: operator,
      captureUrl,
      trivialUrl: trivial.url,
      get baselineUrl() {
        return baseline.url;
      },
      ingestPid: ingest.pid,
      trivialPid: trivial.pid,
      natsPid: nats.pid,
      async purge() {
        for (const name of Object.values(STREAMS)) await jsm.streams.purge(name);
      },
      async freshProjectKey() {
        const projectId = ++projects;
        const key = `${BENCH_KEY}_${projectId}`;
        await kv.put(key, JSON.stringify({ projectId, organizationId: 'bench' }));
        // The node learns of the key from a KV watch: a moment later, not at once.
        const probe = JSON.stringify({ api_key: key, event: 'bench key probe', distinct_id: 'bench' });
        const accepted = async () =>
          (await fetch(`${captureUrl}/capture/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: probe }).catch(() => undefined))?.ok === true;
        await waitFor(`the ingest node to accept project ${projectId}`, accepted, 10_000, 50, signal);
        return key;
      },
      async quiet() {
        const until = performance.now() + o.quietMaxS * 1000;
        // Idle = at most a fifth of a core over 100 ms, all servers together (CPU time has 10 ms ticks).
        for (let before = cpuOf(); performance.now() < until; ) {
          await new Promise((r) => setTimeout(r, 100));
          const now = cpuOf();
          if (now - before <= 0.02) return;
          before = now;
        }
      },
      async restartBaseline() {
        await baseline.kill();
        baseline = await startBaseline(nats.url, operator);
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
