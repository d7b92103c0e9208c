// Backfill requests of one export (BATCH_EXPORT_BACKFILLS, subject
// batch_export_backfills.<team>.<export>), read from the start of what the stream keeps and
// then as they come, by the worker holding the export's lease, into export_backfills (once
// per request id). The stream keeps requests for PIPELINE_REQUEST_MAX_AGE, so a lease moving
// to another worker finds them all again.
import type { ConsumerMessages, JetStreamClient } from '@nats-io/jetstream';
import { parseNdjson, PIPELINE_STREAMS, pipelineSubject, type BatchExportBackfillRequest, type Logger } from '../../lib/index.js';
import type { RunStore } from './run-store.js';

export function watchBackfillRequests(js: JetStreamClient, store: RunStore, teamId: number, logger: Logger, onNew: () => void): { stop(): Promise<void> } {
  let stopped = false;
  let messages: ConsumerMessages | undefined;
  const loop = async () => {
    while (!stopped) {
      try {
        const consumer = await js.consumers.get(PIPELINE_STREAMS.batchExportBackfills.name, { filter_subjects: pipelineSubject('batchExportBackfills', teamId, store.exportId) });
        messages = await consumer.consume({ max_messages: 100 });
        if (stopped) break;
        for await (const msg of messages) {
          for (const request of parseNdjson<Partial<BatchExportBackfillRequest>>(msg.data)) {
            const start = Date.parse(String(request.start_at));
            const end = Date.parse(String(request.end_at));
            if (typeof request.id !== 'string' || !Number.isFinite(start) || !Number.isFinite(end) || !(Number(request.interval_seconds) > 0) || !(Number(request.total_runs) >= 0)) {
              logger.warn({ exportId: store.exportId, seq: msg.seq }, 'backfill request left out: not readable');
              continue;
            }
            const added = await store.addBackfill({
              id: request.id,
              startAt: start,
              endAt: end,
              intervalSeconds: Number(request.interval_seconds),
              totalRuns: Number(request.total_runs),
              createdAt: Date.parse(String(request.created_at)) || msg.time.getTime(),
            });
            if (added) onNew();
          }
        }
      } catch (err) {
        // No stream yet (the admin server creates it), NATS away, the database away: again soon.
        if (!stopped) logger.debug({ exportId: store.exportId, err: String(err) }, 'backfill requests: reading again soon');
      }
      if (!stopped) await new Promise((r) => setTimeout(r, 1_000));
    }
  };
  const running = loop();
  return {
    stop: async () => {
      stopped = true;
      await messages?.close().catch(() => undefined);
      await running;
    },
  };
}
