// What the runner tells the admin server (docs/architecture.md, "Pipeline streams"): run states
// on BATCH_EXPORT_RUNS and log entries on BATCH_EXPORT_LOGS. Message ids are derived from what
// they report, so a republished line (after a NATS timeout) is stored once.
import { createHash } from 'node:crypto';
import type { JetStreamClient } from '@nats-io/jetstream';
import { v5 as uuidv5 } from 'uuid';
import { pipelineSubject, type BatchExportLogLine, type BatchExportRunLine } from '../../lib/index.js';

/** UUIDv5 namespace of run ids and log entry ids. */
const NAMESPACE = '3b5b0c1e-6f0a-4c39-9d8e-5a2f1f0e7a61';

/** The stable id of a run: the same for every attempt, on every worker. */
export function runIdOf(exportId: string, backfillId: string | null, start: number, end: number): string {
  return uuidv5(`${exportId}|${backfillId ?? ''}|${start}|${end}`, NAMESPACE);
}

export type LogLevel = NonNullable<BatchExportLogLine['level']>;

export class RunReporter {
  private logCounter = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly teamId: number,
    private readonly exportId: string,
    private readonly instanceId: string,
  ) {}

  async run(line: BatchExportRunLine): Promise<void> {
    const body = JSON.stringify(line) + '\n';
    const msgID = createHash('sha256').update(`${this.exportId}|${body}`).digest('hex').slice(0, 32);
    await this.js.publish(pipelineSubject('batchExportRuns', this.teamId, this.exportId), body, { msgID: `run:${msgID}` });
  }

  async log(level: LogLevel, message: string, runKey?: string): Promise<void> {
    const id = uuidv5(`${this.instanceId}|${runKey ?? ''}|${++this.logCounter}|${message}`, NAMESPACE);
    const line: BatchExportLogLine = { id, timestamp: new Date().toISOString(), level, message, instance_id: this.instanceId };
    await this.js.publish(pipelineSubject('batchExportLogs', this.teamId, this.exportId), JSON.stringify(line) + '\n', { msgID: `log:${id}` });
  }
}
