// End to end needs the whole system: a local cluster (the launcher of `npm start`, deploy/) in a
// private data dir, by default as `npm start` runs it (one nats-server, one ingest node, one
// worker, the admin server, PostgreSQL). The launcher may come from another checkout's build
// (bench/compare-pipeline.ts measures two builds side by side).
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import type { LaunchOptions, LocalCluster } from '../../deploy/launcher/local-cluster.js';
import { connectNats, type NatsConnection } from '../../lib/index.js';
import { measurePipeline, type PipelineOptions, type PipelineResult, type PipelineTarget } from './e2e-pipeline.js';

export interface ClusterUnderTest {
  target: PipelineTarget;
  stop(): Promise<void>;
}

/** Starts a local cluster from `checkout`'s build (default: this one) and connects to it. */
export async function startClusterUnderTest(o: { dataDir: string; workers?: number; ingest?: number; checkout?: string; env?: NodeJS.ProcessEnv; log: (m: string) => void }): Promise<ClusterUnderTest> {
  const launcher = (o.checkout
    ? await import(pathToFileURL(join(o.checkout, 'dist/deploy/launcher/local-cluster.js')).href)
    : await import('../../deploy/launcher/local-cluster.js')) as { startLocalCluster: (options: LaunchOptions, log: { info(m: string): void; warn(m: string): void }) => Promise<LocalCluster> };
  const options: LaunchOptions = { dataDir: o.dataDir, natsNodes: 1, ingest: o.ingest ?? 1, workers: o.workers ?? 1, env: { ...process.env, LOG_LEVEL: 'warn', ...o.env } };
  o.log(`e2e: starting a local cluster (${options.ingest} ingest, ${options.workers} worker${options.workers === 1 ? '' : 's'})${o.checkout ? ` from ${o.checkout}` : ''}`);
  const local = await launcher.startLocalCluster(options, { info: (m) => o.log(`cluster: ${m}`), warn: (m) => o.log(`cluster: ${m}`) });
  let nc: NatsConnection | undefined;
  try {
    const c = local.cluster;
    const processes = (c.processes ?? []).map((p) => ({ role: p.role, pid: p.pid }));
    const workers = processes.filter((p) => p.role === 'worker').map((p) => p.pid);
    if (workers.length === 0) throw new Error('the launcher started no worker processes; the pipeline cannot be measured');
    nc = await connectNats(c.natsUrl, 'bench-e2e', { user: c.natsUser, pass: c.natsPassword });
    const signal = (name: NodeJS.Signals) => () => {
      for (const pid of workers) process.kill(pid, name);
    };
    const connection = nc;
    return {
      target: { captureUrl: c.captureUrl, nc, key: c.projectApiKey, projectId: c.projectId, processes, pauseWorkers: signal('SIGSTOP'), resumeWorkers: signal('SIGCONT') },
      async stop() {
        signal('SIGCONT')();
        await connection.close().catch(() => undefined);
        await local.stop();
      },
    };
  } catch (err) {
    await nc?.close().catch(() => undefined);
    await local.stop();
    throw err;
  }
}

export async function runEndToEnd(o: { dataDir: string; workers?: number; signal?: AbortSignal } & Omit<PipelineOptions, 'signal'>): Promise<PipelineResult> {
  const cluster = await startClusterUnderTest(o);
  // The suite's stage time limit: stopping the cluster ends the measurement (it then fails).
  const stopOnAbort = () => void cluster.stop();
  o.signal?.addEventListener('abort', stopOnAbort, { once: true });
  try {
    o.signal?.throwIfAborted();
    return await measurePipeline(cluster.target, o);
  } finally {
    o.signal?.removeEventListener('abort', stopOnAbort);
    await cluster.stop();
  }
}
