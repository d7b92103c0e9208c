// Requests for workers (backfills, plugin jobs) are written to the nats_outbox table in the
// same transaction as the change they announce, then published to JetStream and deleted. So a
// request is never announced for a change that rolled back, and never lost when NATS or this
// process is down: whoever flushes next (this replica on its timer, another one, the next
// start) publishes it. Each message carries a Nats-Msg-Id, so JetStream drops a republish
// within its duplicate window; consumers also dedupe by the request id in the payload.
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { Logger, NatsConnection } from '../lib/index.js';
import { inTransaction, type Pool, type Queryable } from './db/pool.js';

const BATCH = 200;
/** How long a request waits for its message to be published before answering anyway. */
const REQUEST_WAIT_MS = 2_000;

export async function enqueueMessage(db: Queryable, subject: string, msgId: string, payload: unknown): Promise<void> {
  await db.query('insert into nats_outbox (subject, msg_id, payload) values ($1, $2, $3)', [subject, msgId, JSON.stringify(payload) + '\n']);
}

export class Outbox {
  private readonly js: JetStreamClient;
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    nc: NatsConnection,
    private readonly pool: Pool,
    private readonly log: Logger,
  ) {
    this.js = jetstream(nc, { timeout: 5_000 });
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

  /** Returns how many messages were published. */
  private async flushNow(): Promise<number> {
    let total = 0;
    for (;;) {
      // skip locked: replicas flushing at once publish different rows.
      const published = await inTransaction(this.pool, async (db) => {
        const { rows } = await db.query<{ id: string; subject: string; msg_id: string; payload: string }>(
          'select id, subject, msg_id, payload from nats_outbox order by id limit $1 for update skip locked',
          [BATCH],
        );
        await Promise.all(rows.map((r) => this.js.publish(r.subject, r.payload, { msgID: r.msg_id })));
        if (rows.length > 0) await db.query('delete from nats_outbox where id = any($1::bigint[])', [rows.map((r) => r.id)]);
        return rows.length;
      });
      total += published;
      if (published < BATCH) return total;
    }
  }
}
