// One way to connect to NATS for every deployable: named connections that reconnect forever,
// so a NATS restart is an outage to wait out, not a crash. Every connection authenticates
// (docs/security.md): Spate's NATS refuses connections without credentials.
import { readFileSync } from 'node:fs';
import { connect, credsAuthenticator, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';

export type { NatsConnection };

/** How a process proves who it is to NATS, and where its replies arrive. */
export interface NatsAuth {
  user?: string;
  pass?: string;
  /** A .creds file (JWT + NKey seed) for servers in operator mode; replaces user/pass. */
  credsFile?: string;
  /** TLS: the CA that signed the servers' certificates, and a client certificate for mutual TLS. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /**
   * Subject prefix of this connection's reply inboxes (`_INBOX` otherwise). The NATS users of
   * Spate's roles may subscribe only under their own prefix, so no role reads another's replies.
   */
  inboxPrefix?: string;
}

export class NatsAuthError extends Error {
  override name = 'NatsAuthError';
}

export interface ConnectOptions {
  /**
   * Errors of requests carry the stack of where they were made (default true). Capturing it on
   * every request costs more than the rest of a JetStream publish on the client: a hot publisher
   * turns it off and says in its own logs what failed.
   */
  asyncTraces?: boolean;
}

export async function connectNats(servers: string, name: string, auth: NatsAuth = {}, connectOptions: ConnectOptions = {}): Promise<NatsConnection> {
  const options: ConnectionOptions = {
    servers: servers.split(',').map((s) => s.trim()),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    // Pings detect a dead server within ~10 s even when the socket stays open.
    pingInterval: 5_000,
    maxPingOut: 2,
    noAsyncTraces: connectOptions.asyncTraces === false,
  };
  if (auth.credsFile) options.authenticator = credsAuthenticator(readFileSync(auth.credsFile));
  else if (auth.user) Object.assign(options, { user: auth.user, pass: auth.pass ?? '' });
  if (auth.tls && (auth.tls.caFile || auth.tls.certFile)) options.tls = { ...auth.tls };
  if (auth.inboxPrefix) options.inboxPrefix = auth.inboxPrefix;
  try {
    return await connect(options);
  } catch (err) {
    if (isAuthFailure(err)) {
      const who = auth.credsFile ? `the credentials in ${auth.credsFile}` : auth.user ? `user ${auth.user}` : 'no credentials';
      throw new NatsAuthError(`NATS at ${servers} refused ${who} (NATS_USER / NATS_PASSWORD / NATS_CREDS)`, { cause: err });
    }
    throw err;
  }
}

function isAuthFailure(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AuthorizationError' || /authorization violation|authentication/i.test(err.message));
}

/**
 * Calls `onChange(false)` when the connection drops and `onChange(true)` when it is back, until
 * the connection closes. For readiness checks and fail-fast paths.
 */
export function watchNatsConnection(nc: NatsConnection, onChange: (connected: boolean, server: string) => void): void {
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect') onChange(false, status.server);
      else if (status.type === 'reconnect') onChange(true, status.server);
    }
  })();
}

/** Unanswered requests (5 s each) a start-up step waits through: ~30 s of a silent server. */
const START_UP_TRIES = 6;

/**
 * Runs an idempotent start-up step again when NATS does not answer a request in time (a server
 * starved of CPU, or busy with its store): a process waits that out instead of exiting. Any other
 * error is thrown as it is; the last timeout as an error naming the step (its cause).
 */
export async function retryUnanswered<T>(what: string, step: () => Promise<T>, logger: Logger): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (!isUnanswered(err)) throw err;
      if (attempt >= START_UP_TRIES) throw new Error(`${what}: NATS did not answer after ${attempt} tries`, { cause: err });
      logger.warn({ step: what, attempt }, 'NATS did not answer in time: trying again');
    }
  }
}

/** A request that got no answer in time. By name: jetstream and kv may hold their own copy of nats-core. */
function isUnanswered(err: unknown): boolean {
  return err instanceof Error && err.name === 'TimeoutError';
}
