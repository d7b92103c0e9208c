// Real nats-server instances for tests: free ports, temp store dirs, async-disposable. Every
// server requires credentials (deploy/nats/auth.conf, random passwords per server): tests connect
// as the operator, and each deployable they start connects as its own role's user.
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, NATS_INBOX_PREFIXES, NATS_USERS, type NatsAuth, type NatsConnection, type NatsRole, type PipelineStreamLimits } from '../../lib/index.js';
import { generateNatsServerAuth, NatsNode, NatsServerExited, startNatsNodes, type NatsServerAuth } from '../../deploy/local/nats-server.js';
import { freePort } from '../../deploy/local/ports.js';
import { makeTestCertificates } from './tls.js';

/** Pipeline stream limits for tests: one replica, no size cap, requests kept, a 2-minute duplicate window. */
export const TEST_PIPELINE_LIMITS: PipelineStreamLimits = { replicas: 1, maxBytes: -1, requestMaxAgeMs: 0, duplicateWindowMs: 2 * 60_000 };

export type NatsUserRole = NatsRole | 'operator';

export interface NatsCredentials {
  /** Operator (full access) and per-role credentials for connectNats. */
  auth: NatsServerAuth;
  /** With TLS: the CA that signed the server's certificate. */
  caFile?: string;
  /** connectNats credentials of a user: the operator, or a role with its own inbox prefix. */
  credentials(user: NatsUserRole): NatsAuth;
  /** NATS_URL, NATS_USER, NATS_PASSWORD of a role, for a deployable's configuration. */
  env(role: NatsRole): Record<string, string>;
  /** A connection as the operator (default) or as a role's user. */
  connect(name: string, user?: NatsUserRole): Promise<NatsConnection>;
}

export interface NatsHandle extends AsyncDisposable, NatsCredentials {
  url: string;
  node: NatsNode;
  /** kill -9 the server. */
  kill(): Promise<void>;
  /** Starts it again on the same port with the same store. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Every running test server's credentials by client URL (of the server, a node, or a proxy to it). */
const byUrl = new Map<string, NatsCredentials>();

/**
 * The credentials of the test nats-server (or cluster, or TCP proxy to one) at `url`, for
 * helpers that are handed only a URL.
 */
export function testNats(url: string): NatsCredentials {
  const found = byUrl.get(url);
  if (!found) throw new Error(`no test nats-server at ${url} (start it with startNats or startNatsCluster)`);
  return found;
}

/** Makes `alias` (a proxy to `target`) known with the target's credentials. */
export function registerNatsAlias(alias: string, target: string): void {
  const found = byUrl.get(target);
  if (found) byUrl.set(alias, credentialsFor(alias, found.auth, found.caFile));
}

function register(urls: readonly string[], credentials: NatsCredentials): () => void {
  for (const url of urls) byUrl.set(url, credentials);
  return () => urls.forEach((url) => byUrl.get(url) === credentials && byUrl.delete(url));
}

/**
 * With SPATE_TEST_NATS_VIOLATIONS=FILE, the permission violations a test server logged are
 * appended to FILE when it stops: how the permissions of deploy/nats/auth.conf were checked
 * against every role's real traffic.
 */
function keepViolations(dir: string): void {
  const out = process.env.SPATE_TEST_NATS_VIOLATIONS;
  const log = join(dir, 'nats.log');
  if (!out || !existsSync(log)) return;
  const lines = readFileSync(log, 'utf8').split('\n').filter((l) => /Violation/.test(l));
  if (lines.length > 0) appendFileSync(out, lines.map((l) => `${process.env.VITEST_WORKER_ID ?? ''} ${l}\n`).join(''));
}

function credentialsFor(url: string, auth: NatsServerAuth, caFile?: string): NatsCredentials {
  const tls = caFile ? { tls: { caFile } } : {};
  const credentials = (user: NatsUserRole): NatsAuth =>
    user === 'operator'
      ? { user: NATS_USERS.operator, pass: auth.passwords.operator, ...tls }
      : { user: NATS_USERS[user], pass: auth.passwords[user], inboxPrefix: NATS_INBOX_PREFIXES[user], ...tls };
  return {
    auth,
    caFile,
    credentials,
    env: (role) => ({ NATS_URL: url, NATS_USER: NATS_USERS[role], NATS_PASSWORD: auth.passwords[role], ...(caFile ? { NATS_TLS_CA: caFile } : {}) }),
    connect: (name, user = 'operator') => connectNats(url, name, credentials(user)),
  };
}

export async function startNats(options: { maxPayload?: number; maxPending?: number; tls?: boolean } = {}): Promise<NatsHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-nats-'));
  const auth = generateNatsServerAuth();
  const certificates = options.tls ? makeTestCertificates(dir) : undefined;
  // A port free a moment ago can be taken by a parallel test before nats-server binds it: start
  // again on other ports then (a CI run lost a test file to it).
  let node: NatsNode;
  for (let attempt = 1; ; attempt++) {
    node = new NatsNode({
      dir,
      port: await freePort(),
      monitorPort: await freePort(),
      serverName: 'test-nats',
      maxPayload: options.maxPayload,
      maxPending: options.maxPending,
      auth,
      tls: certificates,
    });
    try {
      await node.start();
      break;
    } catch (err) {
      if (!(err instanceof NatsServerExited && err.portTaken) || attempt === 3) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
      rmSync(join(dir, 'nats.log'), { force: true }); // the next attempt's log says its own story
    }
  }
  const credentials = credentialsFor(node.url, auth, certificates?.caFile);
  const unregister = register([node.url], credentials);
  const stop = async () => {
    unregister();
    await node.stop();
    keepViolations(dir);
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    url: node.url,
    node,
    ...credentials,
    kill: () => node.kill(),
    restart: async () => {
      await node.stop();
      await node.start();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

export interface NatsClusterHandle extends AsyncDisposable, NatsCredentials {
  /** Comma-separated client URLs of every node. */
  urls: string;
  nodes: NatsNode[];
  stop(): Promise<void>;
}

export async function startNatsCluster(size = 3, options: { maxPayload?: number } = {}): Promise<NatsClusterHandle> {
  const root = mkdtempSync(join(tmpdir(), 'spate-nats-cluster-'));
  const auth = generateNatsServerAuth();
  const nodes = await startNatsNodes(root, size, auth, options);
  const urls = nodes.map((n) => n.url).join(',');
  const credentials = credentialsFor(urls, auth);
  const unregister = register([urls, ...nodes.map((n) => n.url)], credentials);
  const stop = async () => {
    unregister();
    await Promise.all(nodes.map((n) => n.stop()));
    for (const n of nodes) keepViolations(n.options.dir);
    rmSync(root, { recursive: true, force: true });
  };
  return { urls, nodes, ...credentials, stop, [Symbol.asyncDispose]: stop };
}
