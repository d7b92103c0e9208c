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
