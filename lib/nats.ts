// One way to connect to NATS for every deployable: named connections that reconnect forever,
// so a NATS restart is an outage to wait out, not a crash.
import { connect, type NatsConnection } from '@nats-io/transport-node';

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
