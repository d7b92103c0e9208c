// Real nats-server instances for tests: free ports, temp store dirs, async-disposable.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NatsNode, waitForJetStreamLeader } from '../../deploy/local/nats-server.js';
import { freePort } from '../../deploy/local/ports.js';

export interface NatsHandle extends AsyncDisposable {
  url: string;
  node: NatsNode;
  /** kill -9 the server. */
  kill(): Promise<void>;
  /** Starts it again on the same port with the same store. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export async function startNats(options: { maxPayload?: number; maxPending?: number } = {}): Promise<NatsHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-nats-'));
  const node = new NatsNode({
    dir,
    port: await freePort(),
    monitorPort: await freePort(),
    serverName: 'test-nats',
    maxPayload: options.maxPayload,
    maxPending: options.maxPending,
  });
  await node.start();
  const stop = async () => {
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    url: node.url,
    node,
    kill: () => node.kill(),
    restart: async () => {
      await node.stop();
      await node.start();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

export interface NatsClusterHandle extends AsyncDisposable {
  /** Comma-separated client URLs of every node. */
  urls: string;
  nodes: NatsNode[];
  stop(): Promise<void>;
}

export async function startNatsCluster(size = 3, options: { maxPayload?: number } = {}): Promise<NatsClusterHandle> {
  const root = mkdtempSync(join(tmpdir(), 'spate-nats-cluster-'));
  const routePorts: number[] = [];
  for (let i = 0; i < size; i++) routePorts.push(await freePort());
  const nodes: NatsNode[] = [];
  for (let i = 0; i < size; i++) {
    nodes.push(
      new NatsNode({
        dir: join(root, `n${i + 1}`),
        port: await freePort(),
        monitorPort: await freePort(),
        serverName: `n${i + 1}`,
        maxPayload: options.maxPayload,
        cluster: { name: 'spate-test', port: routePorts[i]!, routePorts: routePorts.filter((_, j) => j !== i) },
      }),
    );
  }
  await Promise.all(nodes.map((n) => n.start()));
  await waitForJetStreamLeader(nodes.map((n) => n.monitorUrl));
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(root, { recursive: true, force: true });
  };
  return { urls: nodes.map((n) => n.url).join(','), nodes, stop, [Symbol.asyncDispose]: stop };
}
