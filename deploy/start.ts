// `npm start [-- --nats-nodes 3 --ingest N --stream-partitions K]`: runs the local cluster in the foreground.
// Ctrl-C (or SIGTERM) stops everything in order; a second Ctrl-C forces exit.
import { parseArgs } from 'node:util';
import { clusterFilePath, dataDir as defaultDataDir } from '../lib/index.js';
import { startLocalCluster } from './launcher/local-cluster.js';
import { LOG_FORMAT_ENV, lineFormatter, logFormatOf } from './launcher/log-lines.js';

const USAGE = `usage: npm start -- [--nats-nodes 1|3] [--ingest N] [--workers M] [--stream-partitions K] [--data-dir DIR]

Runs nats-server (or a 3-node JetStream cluster), PostgreSQL, the admin server, N ingest
nodes and M workers under $SPATE_DATA_DIR (default .data/), then writes cluster.json there.
--stream-partitions K splits EVENTS, HISTORICAL and OVERFLOW into K streams each (STREAM_PARTITIONS,
default 1), fixed at the data dir's first start. NATS_URL and
DATABASE_URL use existing servers instead. The children's logs are readable lines on a terminal and
JSON otherwise; ${LOG_FORMAT_ENV}=json|pretty chooses.`;

/** A command line it cannot run: what is wrong and the usage, exit code 2 (never a stack trace). */
function refuse(problem: string): never {
  console.error(`${problem}\n\n${USAGE}`);
  process.exit(2);
}

const values = (() => {
  try {
    return parseArgs({
      options: {
        'nats-nodes': { type: 'string', default: '1' },
        ingest: { type: 'string', default: '1' },
        workers: { type: 'string', default: '1' },
        'stream-partitions': { type: 'string' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (err) {
    return refuse(err instanceof Error ? err.message : String(err));
  }
})();

if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

const natsNodes = Number(values['nats-nodes']);
const ingest = Number(values.ingest);
const workers = Number(values.workers);
const streamPartitions = values['stream-partitions'] === undefined ? undefined : Number(values['stream-partitions']);
if (natsNodes !== 1 && natsNodes !== 3) refuse(`--nats-nodes must be 1 or 3, not ${values['nats-nodes']}`);
if (!Number.isInteger(ingest) || ingest < 1) refuse(`--ingest must be a positive integer, not ${values.ingest}`);
if (!Number.isInteger(workers) || workers < 0) refuse(`--workers must be 0 or more, not ${values.workers}`);
if (streamPartitions !== undefined && (!Number.isInteger(streamPartitions) || streamPartitions < 1)) {
  refuse(`--stream-partitions must be a positive integer, not ${values['stream-partitions']}`);
}

const dataDir = values['data-dir'] ?? defaultDataDir();
const terminal = process.stdout.isTTY === true;
const formatLine = lineFormatter(logFormatOf(process.env, terminal), terminal);
const log = {
  info: (m: string) => console.log(`[spate] ${m}`),
  warn: (m: string) => console.warn(`[spate] ${m}`),
};

const local = await startLocalCluster({ dataDir, natsNodes, ingest, workers, streamPartitions, env: process.env, formatLine }, log).catch((err: unknown) => {
  console.error(`[spate] failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});

const c = local.cluster;
log.info(`ready.
  capture:  ${c.captureUrl}   (POST /capture/, /batch/, …)
  project:  id ${c.projectId}, project API key ${c.projectApiKey}
  admin:    ${c.adminUrl}   (Authorization: Bearer ${c.personalApiKey})
  live:     ${c.adminUrl}/   (the cluster, live, in a browser)
  NATS:     ${c.natsUrl}
  Postgres: ${c.databaseUrl}
  details:  ${clusterFilePath(dataDir)}
Try: curl -X POST ${c.captureUrl}/capture/ -d '{"api_key":"${c.projectApiKey}","event":"hello","distinct_id":"me"}'`);

let signals = 0;
const shutdown = (signal: string) => {
  if (++signals > 1) process.exit(1);
  log.info(`${signal}: stopping (again to force)`);
  local.stop().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
};
process.on('SIGINT', () => shutdown('SIGINT'));
process.on('SIGTERM', () => shutdown('SIGTERM'));
// The terminal went away: stop in order rather than die and leave the children to their lifelines.
process.on('SIGHUP', () => shutdown('SIGHUP'));

// A parent that exits early (npm killed) leaves this process to init: stop the cluster too. The
// children themselves follow the launcher however it dies (deploy/launcher/supervisor.ts).
const parent = process.ppid;
if (parent > 1) {
  setInterval(() => {
    if (process.ppid !== parent && signals === 0) shutdown('parent exited');
  }, 1_000).unref();
}
