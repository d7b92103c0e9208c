// The test process's way into the rig. It runs in the machine's own network namespace, where the
// rig's addresses do not exist (and must not be routed to: they would leave by the default route).
// A relay inside the rig (host `client`) listens on a Unix socket, which crosses namespaces as a
// file; for each rig address the test asks for, a relay here listens on 127.0.0.1 and sends each
// connection through that socket with a header line naming the address.
import { startRelay, type Relay } from './relay.js';

export class Gateway {
  private readonly forwards = new Map<string, Promise<Relay>>();

  constructor(private readonly socketPath: string) {}

  /** A local port that reaches `address:port` inside the rig. */
  async port(address: string, port: number): Promise<number> {
    const key = `${address}:${port}`;
    let relay = this.forwards.get(key);
    if (!relay) {
      relay = startRelay([{ listen: { host: '127.0.0.1', port: 0 }, target: { path: this.socketPath }, header: key }]);
      this.forwards.set(key, relay);
    }
    return ((await relay).addresses[0] as { port: number }).port;
  }

  async url(scheme: 'http' | 'nats' | 'postgres', address: string, port: number, path = ''): Promise<string> {
    const user = scheme === 'postgres' ? 'postgres@' : ''; // the rig's PostgreSQL trusts its network
    return `${scheme}://${user}127.0.0.1:${await this.port(address, port)}${path}`;
  }

  async close(): Promise<void> {
    const relays = [...this.forwards.values()];
    this.forwards.clear();
    await Promise.all(relays.map(async (r) => (await r).close()));
  }
}
