// End to end needs the whole system: the local cluster launcher (deploy/, `npm start`) with
// workers, in a private data dir. The launcher gains its `workers` option with the workers
// themselves; until a launch reports worker processes this refuses to measure.
import { startLocalCluster, type LaunchOptions } from '../../deploy/launcher/local-cluster.js';
import { connectNats } from '../../lib/index.js';
import { measureEndToEndLag, type LagPoint } from './e2e-lag.js';

export async function runEndToEnd(o: { dataDir: string; durationS: number; fractions: readonly number[]; workers?: number; warmUpEvents?: number; log: (m: string) => void; signal?: AbortSignal }): Promise<LagPoint[]> {
  const options: LaunchOptions & { workers?: number } = {
    dataDir: o.dataDir,
    natsNodes: 1,
    ingest: 1,
    workers: o.workers ?? 2,
    env: { ...process.env, LOG_LEVEL: 'warn' },
  };
  o.log(`e2e lag: starting a local cluster with ${options.workers} workers`);
  const local = await startLocalCluster(options, { info: (m) => o.log(`cluster: ${m}`), warn: (m) => o.log(`cluster: ${m}`) });
  // The suite's stage time limit: stopping the cluster ends the measurement (it then fails).
  const stopOnAbort = () => void local.stop();
  o.signal?.addEventListener('abort', stopOnAbort, { once: true });
  try {
    o.signal?.throwIfAborted();
    const c = local.cluster;
    if (!c.processes?.some((p) => p.role === 'worker')) throw new Error('the launcher started no worker processes; end-to-end lag cannot be measured');
    const nc = await connectNats(c.natsUrl, 'bench-e2e', { user: c.natsUser, pass: c.natsPassword });
    try {
      return await measureEndToEndLag({ captureUrl: c.captureUrl, nc, key: c.projectApiKey, projectId: c.projectId, durationS: o.durationS, fractions: o.fractions, warmUpEvents: o.warmUpEvents, log: o.log });
    } finally {
      await nc.close();
    }
  } finally {
    o.signal?.removeEventListener('abort', stopOnAbort);
    await local.stop();
  }
}
