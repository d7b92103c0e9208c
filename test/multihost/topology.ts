// Who runs where in the multi-host rig: every host's address (198.18.0.0/24 on the bridge; nats2's
// own side of its link in 198.19.2.0/30) and the ports the deployables listen on, the same on
// every host as they would be on separate machines.
import { streamLayout } from '../../lib/index.js';
import type { NetworkSpec } from './netns.js';

export const NATS_HOSTS = ['nats1', 'nats2', 'nats3'] as const;
export const INGEST_HOSTS = ['ingest1', 'ingest2'] as const;
export const WORKER_HOSTS = ['worker1', 'worker2'] as const;
export type NatsHost = (typeof NATS_HOSTS)[number];

export const ADDRESS = {
  /** The gateway: the test process reaches the rig through a relay here. */
  client: '198.18.0.2',
  nats1: '198.18.0.11',
  /** nats2's link namespace holds this address; the node itself is behind it (NATS2_INNER). */
  nats2: '198.18.0.12',
  nats3: '198.18.0.13',
  /** HAProxy in front of the ingest nodes: the capture address. */
  lb: '198.18.0.20',
  ingest1: '198.18.0.21',
  ingest2: '198.18.0.22',
  worker1: '198.18.0.31',
  worker2: '198.18.0.32',
  /** PostgreSQL and the admin server. */
  db: '198.18.0.40',
} as const;

/** nats2 and its link (relay.ts carries every byte between the two). */
export const NATS2_LINK = { name: 'nats2', link: 'nats2-link', address: ADDRESS.nats2, linkInner: '198.19.2.1', inner: '198.19.2.2' } as const;

export const PORT = {
  nats: 4222,
  natsRoute: 6222,
  natsMonitor: 8222,
  capture: 8000,
  ingestMetrics: 8001,
  admin: 8010,
  worker: 8020,
  postgres: 5432,
} as const;

/** Ports on nats2's link where its outgoing routes to nats1 and nats3 enter the relay. */
export const NATS2_ROUTE_OUT = { nats1: 6211, nats3: 6213 } as const;

export const NETWORK: NetworkSpec = {
  bridged: (['client', 'nats1', 'nats3', 'lb', 'ingest1', 'ingest2', 'worker1', 'worker2', 'db'] as const).map((name) => ({ name, address: ADDRESS[name] })),
  linked: [NATS2_LINK],
};

/** STREAM_PARTITIONS of the rig's Spate: EVENTS, HISTORICAL and OVERFLOW in three streams, a leader on each node. */
export const STREAM_PARTITIONS = 3;
export const SPATE_LAYOUT = streamLayout(16, STREAM_PARTITIONS);

export const natsUrl = NATS_HOSTS.map((h) => `nats://${ADDRESS[h]}:${PORT.nats}`).join(',');

/**
 * The liveness probe of a NATS node: deploy/k8s/nats-values.yaml sets the same path and number of
 * failures on Kubernetes (with a 10 s period there). /healthz?js-enabled-only=true, the nats chart's
 * own: with its store's disk full, nats-server 2.15.1 disables JetStream on the node for good (it
 * answers 503 there within seconds; /jsz goes on answering 200, and freeing the disk changes
 * nothing) until it is restarted; partitioned, a node answers it 200 but answers 503 to /healthz,
 * which would restart nodes that only need the network back (docs/multihost.md).
 */
export const LIVENESS = { path: '/healthz?js-enabled-only=true', periodMs: 5_000, failures: 3 } as const;
