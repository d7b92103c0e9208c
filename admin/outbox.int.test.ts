// The NATS outbox: one message that can never be published does not hold back the others, a
// message that cannot be published for now waits for the next flush, nothing acknowledged is
// published twice; and a request whose message would not fit NATS's max_payload is refused (413).
import { jetstreamManager } from '@nats-io/jetstream';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ensurePipelineStreams, pipelineSubject, type NatsConnection } from '../lib/index.js';
import { newPlugin } from '../test/admin/endpoints.js';
import { startAdminFixture } from '../test/admin/harness.js';
import { freshDatabase, startNats, TEST_PIPELINE_LIMITS, type NatsHandle } from '../test/kit/index.js';
import { migrate } from './db/migrate.js';
import { createPool, type Pool } from './db/pool.js';
import { Outbox } from './outbox.js';

const MAX_PAYLOAD = 64 * 1024;

let nats: NatsHandle;
let nc: NatsConnection;
/** A second connection that counts every publish on PLUGIN_JOBS subjects (JetStream duplicates included). */
let watcher: NatsConnection;
let pool: Pool;
let outbox: Outbox;
const logs: Array<Record<string, unknown>> = [];
const published = new Map<string, number>();

beforeAll(async () => {
  nats = await startNats({ maxPayload: MAX_PAYLOAD });
  const databaseUrl = await freshDatabase();
  await migrate(databaseUrl);
  pool = createPool(databaseUrl, 4);
  nc = await nats.connect('outbox-test');
  watcher = await nats.connect('outbox-test-watcher');
  await ensurePipelineStreams(await jetstreamManager(nc), TEST_PIPELINE_LIMITS);
  // Only the request subjects: a subscriber on the "nowhere" subject below would answer as a responder.
  watcher.subscribe(`${pipelineSubject('pluginJobs', 1, 1).split('.')[0]}.>`, {
    callback: (_err, msg) => {
      const id = msg.headers?.get('Nats-Msg-Id');
      if (id) published.set(id, (published.get(id) ?? 0) + 1);
    },
  });
  await watcher.flush();
  const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  outbox = new Outbox(nc, pool, log);
});
afterAll(async () => {
  await outbox?.stop();
  await watcher?.close();
  await nc?.close();
  await pool?.end();
  await nats?.stop();
});
beforeEach(async () => {
  await pool.query('delete from nats_outbox');
  logs.length = 0;
});

async function enqueueRaw(subject: string, msgId: string, payload: string): Promise<void> {
  await pool.query('insert into nats_outbox (subject, msg_id, payload) values ($1, $2, $3)', [subject, msgId, payload]);
}

const waitingIds = async () => (await pool.query<{ msg_id: string }>('select msg_id from nats_outbox order by id')).rows.map((r) => r.msg_id);

async function streamMessages(stream: string): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(stream)).state.messages;
}

/** Flushes and waits until the flush is over, then until the watcher has seen what it published. */
async function flushAndSettle(): Promise<void> {
  await outbox.flush(30_000);
  await watcher.flush();
}

describe('outbox', () => {
  it('outbox - a message NATS can never take does not hold back the others: they are published once and deleted, it is dropped and logged', async () => {
    const subject = (id: number) => pipelineSubject('pluginJobs', 1, id);
    const before = await streamMessages('PLUGIN_JOBS');
    await enqueueRaw(subject(1), 'job:a1', '{"n":1}\n');
    await enqueueRaw(subject(2), 'job:a2-too-large', JSON.stringify({ blob: 'x'.repeat(MAX_PAYLOAD) }) + '\n');
    await enqueueRaw(subject(3), 'job:a3', '{"n":3}\n');

    // Two rounds, as the timer does: the second must find nothing left to publish.
    await flushAndSettle();
    await flushAndSettle();
    expect.soft(await waitingIds(), 'rows left in nats_outbox').toEqual([]);
    expect.soft({ a1: published.get('job:a1'), a2: published.get('job:a2-too-large'), a3: published.get('job:a3') }, 'publishes per message').toEqual({ a1: 1, a2: undefined, a3: 1 });
    expect.soft(await streamMessages('PLUGIN_JOBS'), 'messages stored').toBe(before + 2);
    const dropped = logs.find((l) => l.msg_id === 'job:a2-too-large');
    expect.soft(dropped, 'the dropped message is logged').toMatchObject({ level: 50, subject: subject(2), msg_id: 'job:a2-too-large' });
  });

  it('outbox - a message that cannot be published for now stays for the next flush; the acknowledged ones are not published again', async () => {
    // No stream takes this subject: JetStream answers "no responders", as when it is away.
    await enqueueRaw('spate_test_nowhere.1.1', 'job:b-nowhere', '{}\n');
    await enqueueRaw(pipelineSubject('pluginJobs', 1, 4), 'job:b1', '{"n":1}\n');

    await flushAndSettle();
    await flushAndSettle();
    expect.soft(await waitingIds(), 'rows left in nats_outbox').toEqual(['job:b-nowhere']);
    expect.soft(published.get('job:b1'), 'publishes of the acknowledged message').toBe(1);
    expect.soft(logs.find((l) => l.msg_id === 'job:b-nowhere'), 'the retry is logged').toMatchObject({ level: 40, subject: 'spate_test_nowhere.1.1' });
    expect.soft(logs.some((l) => l.level === 50), 'nothing logged as dropped').toBe(false);
  });

  it('outbox - a plugin job whose message would exceed max_payload answers 413 request_too_large and records nothing', async () => {
    // ADMIN_BODY_LIMIT equal to the server's max_payload (as with a stock nats-server, 1 MiB, and
    // the default limit): a body just under the limit makes a message just over it (the request
    // adds ids and a timestamp). The kit's nats-server has Spate's max_payload, 8 MiB.
    await using f = await startAdminFixture({ ADMIN_BODY_LIMIT: '8MiB' });
    const owner = await f.newUser('owner@outbox.example');
    const plugin = await newPlugin(f, owner);
    const config = await f.api('POST', `/api/projects/${owner.projectId}/plugin_configs/`, { key: owner.key, body: { plugin: plugin.id, order: 1, enabled: true } });
    expect(config.status, config.text).toBe(201);
    const path = `/api/projects/${owner.projectId}/plugin_configs/${config.body.id}/job/`;
    const maxPayload = f.nc.info!.max_payload;
    const shell = JSON.stringify({ job: { type: 'x', payload: { blob: '' } } });
    const rawBody = JSON.stringify({ job: { type: 'x', payload: { blob: 'x'.repeat(maxPayload - shell.length - 16) } } });
    expect(rawBody.length).toBeLessThanOrEqual(f.config.bodyLimit);

    const res = await f.api('POST', path, { key: owner.key, rawBody, headers: { 'content-type': 'application/json' } });
    expect(res.status, res.text.slice(0, 300)).toBe(413);
    expect(res.body).toEqual({ type: 'invalid_request', code: 'request_too_large', detail: expect.stringContaining('max_payload'), attr: null });
    const count = async (table: string) => (await f.db.query(`select count(*)::int as n from ${table}`)).rows[0].n;
    expect({ outbox: await count('nats_outbox'), jobs: await count('plugin_jobs') }).toEqual({ outbox: 0, jobs: 0 });

    // A job that fits still goes through.
    expect((await f.api('POST', path, { key: owner.key, body: { job: { type: 'x', payload: { n: 1 } } } })).status).toBe(200);
    expect({ outbox: await count('nats_outbox'), jobs: await count('plugin_jobs') }).toEqual({ outbox: 0, jobs: 1 });
  });
});
