// The servers a worker-side bench runs against: one nats-server (with Spate's users) holding the
// capture and pipeline streams, and a throw-away PostgreSQL, in a temp dir that goes with them.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connectNats, DEFAULT_STREAM_LAYOUT, ensurePipelineStreams, ensureStreams, NATS_USERS, type NatsConnection } from '../../lib/index.js';
import { generateNatsServerAuth, NatsNode, type NatsServerAuth } from '../../deploy/local/nats-server.js';
import { freePort } from '../../deploy/local/ports.js';
import { PostgresServer } from '../../deploy/local/postgres.js';

export interface PipelineServers {
  /** The temp dir; a bench may keep more of its own files there. */
  dir: string;
  nats: NatsNode;
  auth: NatsServerAuth;
  postgres: PostgresServer;
  /** The workers' database (`spate`). */
  databaseUrl: string;
  /** Connected as the operator. */
  nc: NatsConnection;
  /** Stops both servers and removes the dir; never throws. */
  stop(): Promise<void>;
}

export async function startPipelineServers(name: string): Promise<PipelineServers> {
  const dir = mkdtempSync(join(tmpdir(), `spate-${name}-`));
  chmodSync(dir, 0o711); // PostgreSQL runs as another user
  const auth = generateNatsServerAuth();
  const nats = new NatsNode({ dir: join(dir, 'nats'), port: await freePort(), monitorPort: await freePort(), serverName: name, auth });
  const postgres = new PostgresServer({ dataDir: join(dir, 'pg'), port: await freePort(), durable: false });
  let nc: NatsConnection | undefined;
  const stop = async () => {
    await nc?.close().catch(() => undefined);
    await postgres.stop().catch(() => undefined);
    await nats.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await nats.start();
    await postgres.init();
    await postgres.start();
    const databaseUrl = await postgres.createDatabase('spate');
    nc = await connectNats(nats.url, name, { user: NATS_USERS.operator, pass: auth.passwords.operator });
    const jsm = await jetstreamManager(nc);
    await ensureStreams(jsm, { replicas: 1, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 }, DEFAULT_STREAM_LAYOUT);
    await ensurePipelineStreams(jsm, { replicas: 1, maxBytes: -1, requestMaxAgeMs: 0, duplicateWindowMs: 120_000 });
    return { dir, nats, auth, postgres, databaseUrl, nc, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
