// One way to connect to NATS for every deployable: named connections that reconnect forever,
// so a NATS restart is an outage to wait out, not a crash.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';

export type { NatsConnection };

export async function connectNats(servers: string, name: string): Promise<NatsConnection> {
  return connect({
    servers: servers.split(',').map((s) => s.trim()),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    // Pings detect a dead server within ~10 s even when the socket stays open.
    pingInterval: 5_000,
    maxPingOut: 2,
  });
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
