// Requests for workers (backfills, plugin jobs) are written to the nats_outbox table in the
// same transaction as the change they announce, then published to JetStream and deleted. So a
// request is never announced for a change that rolled back, and never lost when NATS or this
// process is down: whoever flushes next (this replica on its timer, another one, the next
// start) publishes it. Each message carries a Nats-Msg-Id, so JetStream drops a republish
// within its duplicate window; consumers also dedupe by the request id in the payload.
// A message NATS refuses for good (larger than its max_payload, refused by the stream) is dropped
// and logged at error level, not retried forever ahead of the rows behind it; enqueue() refuses
// oversized ones up front (413 request_too_large).
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import { InvalidArgumentError, InvalidSubjectError, RequestError } from '@nats-io/transport-node';
import type { Logger, NatsConnection } from '../lib/index.js';
import { inTransaction, type Pool, type Queryable } from './db/pool.js';
import { apiError } from './errors.js';

const BATCH = 200;
/** How long a request waits for its message to be published before answering anyway. */
const REQUEST_WAIT_MS = 2_000;
/**
 * Room for the headers a publish adds besides the msg id itself ("NATS/1.0\r\nNats-Msg-Id: …\r\n\r\n"
 * is 27 bytes): max_payload bounds headers plus payload.
 */
const HEADERS_MARGIN = 64;

interface OutboxRow {
  id: string;
  subject: string;
  msg_id: string;
  payload: string;
}

export class Outbox {
  private readonly js: JetStreamClient;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly pool: Pool,
    private readonly log: Logger,
  ) {
    this.js = jetstream(nc, { timeout: 5_000 });
  }

  /**
   * Writes a message to publish once `db`'s transaction commits. Throws 413 request_too_large
   * when it could never be published: larger than the connected server's max_payload.
   */
  async enqueue(db: Queryable, subject: string, msgId: string, payload: unknown): Promise<void> {
    const text = JSON.stringify(payload) + '\n';
    const bytes = Buffer.byteLength(text) + Buffer.byteLength(msgId) + HEADERS_MARGIN;
    // Unknown only while the connection is closed; the flush then drops what does not fit.
    const maxPayload = this.nc.info?.max_payload;
    if (maxPayload !== undefined && bytes > maxPayload) {
      throw apiError(
        'request_too_large',
        `This request is too large to send to the workers: its message would take ${bytes} bytes, NATS accepts at most ${maxPayload} (max_payload).`,
      );
    }
    await db.query('insert into nats_outbox (subject, msg_id, payload) values ($1, $2, $3)', [subject, msgId, text]);
  }

  /** Publishes what is waiting now and every `intervalMs` (messages other replicas left behind). */
  start(intervalMs: number): void {
    void this.flush(0);
    this.timer = setInterval(() => void this.flush(0), intervalMs);
    this.timer.unref();
  }

  /** Publishes every waiting message; waits at most `maxWaitMs` (0: does not wait). Never throws. */
  async flush(maxWaitMs = REQUEST_WAIT_MS): Promise<void> {
    if (this.stopped) return;
    const run = this.chain.then(() => this.flushNow());
    this.chain = run.catch((err: unknown) => this.log.warn({ err }, 'could not publish the NATS outbox; retrying later'));
    if (maxWaitMs <= 0) return;
    await Promise.race([this.chain, sleep(maxWaitMs, undefined, { ref: false })]);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await Promise.race([this.chain, sleep(5_000, undefined, { ref: false })]);
  }

  /**
   * Returns how many messages were published. Deletes the acknowledged rows and those that can
   * never be published (logged, so one of them does not hold back the rows behind it); keeps
   * those that failed for now and stops there, for the next flush.
   */
  private async flushNow(): Promise<number> {
    let total = 0;
    for (;;) {
      // skip locked: replicas flushing at once publish different rows.
      const batch = await inTransaction(this.pool, async (db) => {
        const { rows } = await db.query<OutboxRow>('select id, subject, msg_id, payload from nats_outbox order by id limit $1 for update skip locked', [BATCH]);
        const results = await Promise.allSettled(rows.map((r) => this.js.publish(r.subject, r.payload, { msgID: r.msg_id })));
        const dropped: Array<{ row: OutboxRow; err: unknown }> = [];
        const kept: Array<{ row: OutboxRow; err: unknown }> = [];
        const done: string[] = [];
        results.forEach((result, i) => {
          const row = rows[i]!;
          if (result.status === 'rejected' && !isPermanentPublishError(result.reason)) kept.push({ row, err: result.reason });
          else {
            if (result.status === 'rejected') dropped.push({ row, err: result.reason });
            done.push(row.id);
          }
        });
        if (done.length > 0) await db.query('delete from nats_outbox where id = any($1::bigint[])', [done]);
        return { size: rows.length, published: done.length - dropped.length, dropped, kept };
      });
      total += batch.published;
      // Keeping such a row would fail it again on every flush; its change (job, backfill) stays recorded.
      for (const { row, err } of batch.dropped) {
        this.log.error({ err, subject: row.subject, msg_id: row.msg_id, bytes: Buffer.byteLength(row.payload) }, 'NATS refused an outbox message for good; dropped it');
      }
      if (batch.kept.length > 0) {
        const { row, err } = batch.kept[0]!;
        this.log.warn({ err, count: batch.kept.length, subject: row.subject, msg_id: row.msg_id }, 'could not publish NATS outbox messages; retrying later');
        return total;
      }
      if (batch.size < BATCH) return total;
    }
  }
}

/** JetStream's "message size exceeds maximum allowed" (the stream's max_msg_size). */
const MESSAGE_TOO_LARGE = 10054;

/**
 * Whether a publish fails the same way every time: the client refuses the message (larger than
 * max_payload, a bad subject) or JetStream finds it larger than the stream allows. Anything else —
 * NATS or JetStream away, slow, full (account or storage limits answer 400 too), or an error not
 * known here — is retried: dropping a request takes being sure.
 */
function isPermanentPublishError(err: unknown): boolean {
  if (err instanceof JetStreamApiError) return err.code === MESSAGE_TOO_LARGE;
  if (err instanceof RequestError && err.cause !== undefined) return isPermanentPublishError(err.cause);
  return err instanceof InvalidArgumentError || err instanceof InvalidSubjectError;
}
