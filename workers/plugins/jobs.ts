// Jobs (docs/plugins.md, "Jobs"): `POST …/plugin_configs/:id/job/` publishes a request on
// PLUGIN_JOBS (`plugin_jobs.<team>.<config>`); the worker holding the config's lease reads every
// request the stream keeps for it, from the start, and runs the job the plugin exports under
// `jobs` (`jobs.<type>(payload, meta)`, the payload with PostHog's `$operation`), once per request:
// a request is recorded in plugin_job_runs (under the holder's fence) before its job runs, so a
// request read again (a new holder, a restart) is not run again. A job cut short by its worker
// stopping outright is reported by the next holder, not run again. A type the plugin does not
// export is an ERROR in the config's logs.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConsumerMessages, JetStreamClient } from '@nats-io/jetstream';
import { parseNdjson, PIPELINE_STREAMS, pipelineSubject, type Logger, type PluginJobRequest } from '../../lib/index.js';
import { errorText, OwnershipLostError } from '../coordination/index.js';
import type { HeldMetrics } from './held-metrics.js';
import type { HolderState } from './holder-state.js';
import type { PluginInstance } from './instance.js';

const RETRY_MS = 1_000;

export interface JobsDeps {
  js: JetStreamClient;
  instance: PluginInstance;
  state: HolderState;
  metrics: HeldMetrics;
  logger: Logger;
  mayAct(): boolean;
  lost(reason: string): void;
}

/** Reads the config's job requests and runs them, one at a time; stop() waits for a job in progress. */
export function startJobs(deps: JobsDeps): { stop(): Promise<void> } {
  const { js, state, logger } = deps;
  const abort = new AbortController();
  const signal = abort.signal;
  let messages: ConsumerMessages | undefined;
  const loop = async () => {
    await reportInterrupted(deps).catch((err: unknown) => logger.warn({ err: errorText(err), configId: state.configId }, 'reading interrupted jobs failed'));
    while (!signal.aborted) {
      try {
        const consumer = await js.consumers.get(PIPELINE_STREAMS.pluginJobs.name, { filter_subjects: pipelineSubject('pluginJobs', state.teamId, state.configId) });
        messages = await consumer.consume({ max_messages: 100 });
        if (signal.aborted) break;
        for await (const msg of messages) {
          const requests = parseNdjson<Partial<PluginJobRequest>>(msg.data).filter((r): r is PluginJobRequest => typeof r.id === 'string' && typeof r.type === 'string');
          const known = await state.knownJobs(requests.map((r) => r.id));
          for (const request of requests) {
            if (signal.aborted) return;
            if (!known.has(request.id)) await runJob(request, deps, signal);
          }
        }
      } catch (err) {
        if (err instanceof OwnershipLostError) {
          deps.lost(err.message);
          return;
        }
        // No stream yet (the admin server creates it), NATS away, the database away: again soon.
        if (!signal.aborted) logger.debug({ configId: state.configId, err: errorText(err) }, 'job requests: reading again soon');
      }
      if (!signal.aborted) await sleep(RETRY_MS, undefined, { signal }).catch(() => undefined);
    }
  };
  const running = loop();
  return {
    async stop() {
      abort.abort();
      await messages?.close().catch(() => undefined);
      await running;
    },
  };
}

async function reportInterrupted(deps: JobsDeps): Promise<void> {
  for (const job of await deps.state.interruptedJobs()) {
    deps.instance.log('SYSTEM', 'WARN', `Job "${job.type}" (${job.id}), started ${job.startedAt.toISOString()}, was cut short: the worker running it stopped. It is not run again.`);
  }
}

async function runJob(request: PluginJobRequest, deps: JobsDeps, signal: AbortSignal): Promise<void> {
  const { instance, state, metrics } = deps;
  // Its exports are known once it is set up; a job waits for that (and for the lease to be sure).
  while (!deps.mayAct() || !(await instance.ready())) await sleep(RETRY_MS, undefined, { signal });
  if (!(await state.claimJob(request.id, request.type))) return;
  const method = `job:${request.type}`;
  if (!instance.has(method)) {
    instance.log('PLUGIN', 'ERROR', `Job "${request.type}" (${request.id}) not found: the plugin exports no such job (its \`jobs\` export names the jobs it runs)`);
    metrics.jobs.inc({ outcome: 'unknown' });
    await state.finishJob(request.id, 'unknown');
    return;
  }
  const began = performance.now();
  let outcome = 'ok';
  try {
    const payload = { ...(request.payload ?? {}), $operation: request.operation ?? 'start' };
    const done = await instance.call(method, [payload]);
    if (!done) {
      outcome = 'failed';
      instance.log('SYSTEM', 'ERROR', `Job "${request.type}" (${request.id}) did not run: the plugin was being set up again. It is not run again.`);
    } else {
      instance.log('SYSTEM', 'INFO', `Job "${request.type}" (${request.id}) ran in ${Math.round(performance.now() - began)} ms.`);
    }
  } catch (err) {
    outcome = 'failed';
    instance.log('PLUGIN', 'ERROR', `Job "${request.type}" (${request.id}) failed: ${err instanceof Error ? err.message : String(err)}`);
  }
  metrics.jobs.inc({ outcome });
  await state.finishJob(request.id, outcome);
}
