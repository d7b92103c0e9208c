// Each destination against a real server (s3rver, PostgreSQL, a node:http receiver), through the
// whole runner: events on PROCESSED → backfill run → what the destination holds.
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { STREAMS, type CapturedEvent } from '../../lib/index.js';
import { s3Destination, startExportRig, type ExportRig } from '../../test/exports/harness.js';
import { freshDatabase, waitFor } from '../../test/kit/index.js';
import { capture, publishEvents, waitForCommitted, waitForProcessed } from '../../test/workers/harness.js';

let rig: ExportRig | undefined;
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
  await rig?.stop();
  rig = undefined;
});

function eventsBetween(count: number, from: string, to: string, extra: (i: number) => Partial<CapturedEvent> = () => ({})): CapturedEvent[] {
  const start = Date.parse(from);
  const step = (Date.parse(to) - start) / count;
  return Array.from({ length: count }, (_, i) =>
    capture(1, ['pageview', 'signup', '$autocapture'][i % 3]!, `user-${i % 41}`, { i, blob: 'x'.repeat(200) }, { timestamp: new Date(start + Math.floor(i * step)).toISOString(), ...extra(i) }),
  );
}

async function withEvents(r: ExportRig, events: CapturedEvent[]): Promise<void> {
  await publishEvents(r.js, events);
  await waitForProcessed(r.nc, events.length);
}

const HOUR = { start: '2024-05-01T12:00:00.000Z', end: '2024-05-01T13:00:00.000Z' };

async function readParquet(body: Buffer): Promise<Array<Record<string, unknown>>> {
  const file = join(mkdtempSync(join(tmpdir(), 'spate-pq-')), 'f.parquet');
  writeFileSync(file, body);
  return parquetReadObjects({ file: await asyncBufferFromFile(file), compressors });
}

interface Received {
  headers: IncomingMessage['headers'];
  body: { api_key: string; historical_migration: boolean; batch: Array<Record<string, unknown>> };
}

/** A receiver answering with the given statuses in turn (then 200), recording every request. */
async function receiver(statuses: number[]): Promise<{ url: string; requests: Received[] }> {
  const requests: Received[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const text = (req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8');
      requests.push({ headers: req.headers, body: JSON.parse(text) as Received['body'] });
      const status = statuses.shift() ?? 200;
      res.writeHead(status, { 'content-type': 'application/json' }).end(status === 200 ? '{"status":1}' : `{"detail":"answer ${status}"}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/batch/`, requests };
}

interface S3Request {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
}

/**
 * A proxy in front of the rig's s3rver that records every request's method, path and headers
 * and forwards it byte for byte (Host kept, so the signature still holds), unless `refuse` names
 * a status to answer instead.
 */
async function recordingS3Proxy(target: string, refuse: (req: IncomingMessage) => number | undefined = () => undefined): Promise<{ endpoint: string; requests: S3Request[] }> {
  const requests: S3Request[] = [];
  const to = new URL(target);
  const server = createServer((req, res) => {
    requests.push({ method: req.method!, url: req.url!, headers: req.headers });
    const status = refuse(req);
    if (status !== undefined) {
      req.resume();
      res.writeHead(status, { 'content-type': 'application/xml' }).end(`<Error><Code>ServiceUnavailable</Code><Message>refused by the test</Message></Error>`);
      return;
    }
    const forward = httpRequest({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', (err) => res.destroy(err));
    req.pipe(forward);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise((r) => server.close(r)));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

describe('export destinations', () => {
  it('S3 - Parquet split by max_file_size_mb: numbered files and a manifest, every event once, PostHog column types', async () => {
    rig = await startExportRig();
    const sent = eventsBetween(12_000, HOUR.start, HOUR.end);
    await withEvents(rig, sent);
    const record = await rig.putExport({
      id: crypto.randomUUID(),
      destination: s3Destination(rig, { prefix: 'pq', compression: null, file_format: 'Parquet', max_file_size_mb: 1 }),
    });
    const backfillId = await rig.backfill(record, HOUR.start, HOUR.end);
    const done = await rig.waitForRun('the backfill run', (l) => l.backfill_id === backfillId && l.status === 'Completed');
    expect(done.records_completed).toBe(12_000);
    const keys = await rig.s3.list('exports', 'pq/');
    const base = `pq/2024-05-01T12:00:00+00:00-2024-05-01T13:00:00+00:00-backfill-${backfillId}`;
    const files = keys.filter((k) => k.endsWith('.parquet'));
    expect(files.length).toBeGreaterThan(2);
    expect(files.sort()).toEqual(files.map((_, i) => `${base}-${i}.parquet`).sort());
    expect(JSON.parse((await rig.s3.get('exports', `${base}_manifest.json`)).toString())).toEqual({ files: files.map((_, i) => `${base}-${i}.parquet`) });
    const rows: Array<Record<string, unknown>> = [];
    for (const key of files) rows.push(...(await readParquet(await rig.s3.get('exports', key))));
    expect(rows.map((r) => r.uuid).sort()).toEqual(sent.map((e) => e.uuid).sort());
    const row = rows.find((r) => r.uuid === sent[0]!.uuid)!;
    expect(JSON.parse(row.properties as string)).toMatchObject({ i: 0 });
    expect((row.timestamp as Date).toISOString()).toBe('2024-05-01T12:00:00.000Z');
    expect(row.team_id).toBe(1n);
  });

  it('S3 - JSONLines gzip split by max_file_size_mb: each file cut once its text reaches 1 MiB, every event once', async () => {
    rig = await startExportRig();
    // Multi-byte text: files are cut on bytes, not characters.
    const sent = eventsBetween(9_000, HOUR.start, HOUR.end, (i) => ({ properties: { i, text: 'é€😀'.repeat(20 + (i % 30)) } }));
    await withEvents(rig, sent);
    const record = await rig.putExport({
      id: crypto.randomUUID(),
      destination: s3Destination(rig, { prefix: 'jl', max_file_size_mb: 1 }),
    });
    const backfillId = await rig.backfill(record, HOUR.start, HOUR.end);
    const done = await rig.waitForRun('the backfill run', (l) => l.backfill_id === backfillId && l.status === 'Completed');
    expect(done.records_completed).toBe(9_000);
    const base = `jl/2024-05-01T12:00:00+00:00-2024-05-01T13:00:00+00:00-backfill-${backfillId}`;
    const { files } = JSON.parse((await rig.s3.get('exports', `${base}_manifest.json`)).toString()) as { files: string[] };
    expect(files.length).toBeGreaterThan(3);
    expect(files).toEqual(files.map((_, i) => `${base}-${i}.jsonl.gz`));
    const uuids: string[] = [];
    for (const [n, key] of files.entries()) {
      const text = gunzipSync(await rig.s3.get('exports', key)).toString('utf8');
      const lines = text.split('\n').filter(Boolean);
      const bytes = Buffer.byteLength(text);
      const last = Buffer.byteLength(`${lines.at(-1)!}\n`);
      // A file takes lines while it holds less than 1 MiB: all but the last reach it, none by more than its last line.
      if (n < files.length - 1) expect(bytes).toBeGreaterThanOrEqual(1024 * 1024);
      expect(bytes - last).toBeLessThan(1024 * 1024);
      for (const l of lines) uuids.push((JSON.parse(l) as { uuid: string }).uuid);
    }
    expect(uuids).toHaveLength(sent.length);
    expect(uuids.sort()).toEqual(sent.map((e) => e.uuid).sort());
  });

  it('S3 - brotli JSONLines; a rerun of the same interval overwrites the same key with the same bytes', async () => {
    rig = await startExportRig();
    const sent = eventsBetween(500, HOUR.start, HOUR.end);
    await withEvents(rig, sent);
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: s3Destination(rig, { prefix: 'br', compression: 'brotli' }) });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    await rig.waitForRun('the run', (l) => l.backfill_id === id && l.status === 'Completed');
    const [key] = await rig.s3.list('exports', 'br/');
    const { brotliDecompressSync } = await import('node:zlib');
    const first = await rig.s3.get('exports', key!);
    const lines = brotliDecompressSync(first).toString().split('\n').filter(Boolean);
    expect(lines).toHaveLength(500);
    // The same backfill id again (a redelivered request is ignored; a new one with the same id would overwrite): a second backfill writes its own keys.
    const again = await rig.backfill(record, HOUR.start, HOUR.end);
    await rig.waitForRun('the second backfill', (l) => l.backfill_id === again && l.status === 'Completed');
    const keys = await rig.s3.list('exports', 'br/');
    expect(keys).toHaveLength(2);
    expect(await rig.s3.get('exports', keys.find((k) => k.includes(again))!)).toEqual(first);
  });

  it('S3 - a multipart upload that fails mid-run fails the run, it does not hang', async () => {
    rig = await startExportRig();
    // ~14 MB of gzip (random text barely compresses): the upload goes multipart while lines are still written.
    const sent = eventsBetween(20_000, HOUR.start, HOUR.end, (i) => ({ properties: { i, noise: randomBytes(700).toString('base64') } }));
    await withEvents(rig, sent);
    const proxy = await recordingS3Proxy(rig.s3.endpoint, (req) => (req.method === 'PUT' && /[?&]partNumber=/.test(req.url!) ? 503 : undefined));
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: s3Destination(rig, { prefix: 'broken', endpoint_url: proxy.endpoint }) });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    // Failed or FailedRetryable by what the store answers last (s3rver refuses the upload's abort, 405).
    const failed = await rig.waitForRun('the failed run', (l) => l.backfill_id === id && (l.status === 'Failed' || l.status === 'FailedRetryable'), 40_000);
    expect(failed.latest_error).toMatch(/bucket exports/);
    expect(proxy.requests.some((r) => /[?&]partNumber=/.test(r.url))).toBe(true);
    expect(await rig.s3.list('exports', 'broken/')).toEqual([]);
  });

  it('S3 - on a custom endpoint_url no checksum is sent (S3-compatible stores refuse them); encryption and kms_key_id reach the uploads', async () => {
    rig = await startExportRig();
    // ~10 MB of JSONLines: a multipart upload (8 MiB parts) besides HeadBucket.
    const sent = eventsBetween(20_000, HOUR.start, HOUR.end);
    await withEvents(rig, sent);
    const proxy = await recordingS3Proxy(rig.s3.endpoint);
    const destination = s3Destination(rig, { prefix: 'sse', endpoint_url: proxy.endpoint, compression: null, encryption: 'aws:kms', kms_key_id: 'arn:aws:kms:us-east-1:111122223333:key/spate-test' });
    const record = await rig.putExport({ id: crypto.randomUUID(), destination });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    const done = await rig.waitForRun('the run', (l) => l.backfill_id === id && l.status === 'Completed');
    expect(done.records_completed).toBe(20_000);
    const [key] = await rig.s3.list('exports', 'sse/');
    expect((await rig.s3.get('exports', key!)).toString().split('\n').filter(Boolean)).toHaveLength(20_000);

    const writes = proxy.requests.filter((r) => r.method === 'PUT' || r.method === 'POST');
    const kinds = writes.map((r) => (r.url.includes('partNumber=') ? 'UploadPart' : r.url.includes('uploadId=') ? 'CompleteMultipartUpload' : r.url.includes('uploads') ? 'CreateMultipartUpload' : 'PutObject'));
    expect(new Set(kinds)).toEqual(new Set(['CreateMultipartUpload', 'UploadPart', 'CompleteMultipartUpload']));
    for (const r of proxy.requests) {
      const checksumHeaders = Object.keys(r.headers).filter((h) => /^x-amz-(checksum-|sdk-checksum-algorithm|trailer$)/.test(h));
      expect(checksumHeaders, `${r.method} ${r.url}`).toEqual([]);
      expect(r.headers['content-encoding'] ?? '', `${r.method} ${r.url}`).not.toContain('aws-chunked');
    }
    const create = writes[kinds.indexOf('CreateMultipartUpload')]!;
    expect(create.headers['x-amz-server-side-encryption']).toBe('aws:kms');
    expect(create.headers['x-amz-server-side-encryption-aws-kms-key-id']).toBe(destination.config.kms_key_id);
  });

  it('S3 - a missing bucket fails at once with an error a person can act on; repeated failures ask the admin server to pause the export', async () => {
    const clock = { offset: 0 };
    rig = await startExportRig({ env: { EXPORT_AUTO_PAUSE: '2/5' }, deps: { exportClock: { now: () => Date.now() + clock.offset, toReal: (t) => t - clock.offset } } });
    // Two 5-minute intervals already due on the runner's clock.
    const record = await rig.putExport({ id: crypto.randomUUID(), interval: 'every 5 minutes', destination: { type: 'S3', config: { bucket_name: 'no-such-bucket', region: 'us-east-1', prefix: 'x', endpoint_url: rig.s3.endpoint, aws_access_key_id: 'S3RVER', aws_secret_access_key: 'S3RVER' } } });
    // Once the runner has started its schedule (at the interval of "now"), the clock jumps two intervals on.
    await waitFor('the export leased', () => rig!.worker.heldExports().includes(record.id), 10_000, 50);
    await new Promise((r) => setTimeout(r, 1_000));
    clock.offset = 600_000 + 5_000;
    const failed = await rig.waitForRun('the first failure', (l) => l.exportId === record.id && l.status === 'Failed', 20_000);
    expect(failed.latest_error).toBe('NoSuchBucket on bucket no-such-bucket');
    await waitFor('the failure counted', async () => /^spate_export_runs_total\{[^}]*destination="S3",status="Failed"[^}]*\} [1-9]\d*$/m.test(await rig!.worker.metrics.registry.metrics()), 5_000, 50);
    const paused = await rig.waitForRun('the pause request', (l) => l.exportId === record.id && l.status === 'Failed' && Boolean(l.pause_export));
    expect(paused.pause_export).toBe('2 of the last 2 scheduled runs failed (limit 2 of 5)');
    // Failed at once: never FailedRetryable.
    expect(rig.runs().filter((l) => l.status === 'FailedRetryable')).toEqual([]);
    await waitFor('the log entry', () => rig!.logs().some((l) => l.level === 'ERROR' && l.message.includes('Pausing the export: 2 of the last 2')), 5_000, 50);
  });

  it('egress - a destination on a loopback address is refused unless EXPORT_EGRESS_ALLOW allows it', async () => {
    rig = await startExportRig({ env: { EXPORT_EGRESS_ALLOW: '' } });
    await withEvents(rig, eventsBetween(10, HOUR.start, HOUR.end));
    const http = await receiver([]);
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: { type: 'HTTP', config: { url: http.url, token: 'phc_x' } } });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    const failed = await rig.waitForRun('the refused run', (l) => l.backfill_id === id && l.status === 'Failed');
    expect(failed.latest_error).toMatch(/^destination host 127\.0\.0\.1 resolves to 127\.0\.0\.1, a loopback address: refused by the egress policy/);
    expect(http.requests).toEqual([]);
  });

  it('HTTP - PostHog batch format in batches of at most 5000, gzip for big bodies; 5xx is retried, the run completes', async () => {
    rig = await startExportRig();
    const sent = eventsBetween(12_000, HOUR.start, HOUR.end);
    await withEvents(rig, sent);
    const http = await receiver([503, 500]);
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: { type: 'HTTP', config: { url: http.url, token: 'phc_dest' } } });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    const done = await rig.waitForRun('the run', (l) => l.backfill_id === id && l.status === 'Completed');
    expect(done.records_completed).toBe(12_000);
    // The first batch was sent three times (503, 500, then 200).
    expect(http.requests.map((r) => r.body.batch.length)).toEqual([5000, 5000, 5000, 5000, 2000]);
    expect(http.requests[0]!.headers['content-encoding']).toBe('gzip');
    const delivered = http.requests.slice(2).flatMap((r) => r.body.batch);
    expect(delivered.map((e) => e.uuid).sort()).toEqual(sent.map((e) => e.uuid).sort());
    const auto = delivered.find((e) => e.event === '$autocapture')!;
    expect(http.requests[2]!.body).toMatchObject({ api_key: 'phc_dest', historical_migration: true });
    expect(Object.keys(auto)).toEqual(['uuid', 'distinct_id', 'timestamp', 'event', 'properties']);
    expect(auto.properties).toMatchObject({ $geoip_disable: true });
  });

  it('runs - a failure of the moment is FailedRetryable and tried again after a back-off; the retry completes the run', async () => {
    rig = await startExportRig({ env: { EXPORT_HTTP_RETRY_BACKOFF: '20ms', EXPORT_RETRY_BACKOFF: '300ms' } });
    const sent = eventsBetween(30, HOUR.start, HOUR.end);
    await withEvents(rig, sent);
    // Six 503s: the first attempt's request and its 5 re-sends.
    const http = await receiver([503, 503, 503, 503, 503, 503]);
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: { type: 'HTTP', config: { url: http.url, token: 'phc_dest' } } });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    const done = await rig.waitForRun('the retried run', (l) => l.backfill_id === id && l.status === 'Completed');
    expect(done.records_completed).toBe(30);
    const statuses = rig.runs().filter((l) => l.backfill_id === id).map((l) => l.status);
    expect(statuses).toEqual(['Running', 'FailedRetryable', 'Running', 'Completed']);
    expect(rig.runs().find((l) => l.backfill_id === id && l.status === 'FailedRetryable')!.latest_error).toMatch(/answered 503/);
    expect(http.requests.map((r) => r.body.batch.length)).toEqual([30, 30, 30, 30, 30, 30, 30]);
    await waitFor('the warning logged', () => rig!.logs().some((l) => l.level === 'WARNING' && /Attempt 1 failed \(unavailable\)/.test(l.message)), 5_000, 50);
  });

  it('HTTP - a 4xx answer fails the run at once with the answer in latest_error', async () => {
    rig = await startExportRig();
    await withEvents(rig, eventsBetween(10, HOUR.start, HOUR.end));
    const http = await receiver([400]);
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: { type: 'HTTP', config: { url: http.url, token: 'phc_dest' } } });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    const failed = await rig.waitForRun('the failed run', (l) => l.backfill_id === id && l.status === 'Failed');
    expect(failed.latest_error).toMatch(/^HTTP 127\.0\.0\.1:\d+ answered 400: \{"detail":"answer 400"\}$/);
    expect(http.requests).toHaveLength(1);
  });

  it('backfill - older than what PROCESSED retains fails loudly instead of exporting nothing', async () => {
    rig = await startExportRig();
    await withEvents(rig, eventsBetween(100, HOUR.start, HOUR.end));
    const jsm = await jetstreamManager(rig.nc);
    const { state } = await jsm.streams.info(STREAMS.processed);
    await jsm.streams.purge(STREAMS.processed, { seq: state.last_seq }); // as if the oldest messages had aged out
    const record = await rig.putExport({ id: crypto.randomUUID(), destination: { type: 'NoOp', config: {} } });
    const id = await rig.backfill(record, HOUR.start, HOUR.end);
    const failed = await rig.waitForRun('the failed run', (l) => l.backfill_id === id && l.status === 'Failed');
    expect(failed.latest_error).toMatch(/^this backfill run starts at 2024-05-01T12:00:00\.000Z, older than what PROCESSED retains \(events stored from .* on; STREAM_MAX_AGE\)/);
  });

  it('PostgreSQL - persons merged by upsert keeping the newest version; a user-made table with fewer columns gets the columns it has', async () => {
    rig = await startExportRig();
    const url = await freshDatabase();
    const u = new URL(url);
    const config = { host: u.hostname, port: Number(u.port), user: 'postgres', password: 'unused', database: u.pathname.slice(1) };
    const dest = new pg.Client({ connectionString: url });
    await dest.connect();
    cleanups.push(() => dest.end());
    await dest.query('CREATE TABLE slim (uuid text, event text, "timestamp" timestamptz)');
    const at = (minute: number) => ({ timestamp: `2024-05-01T12:0${minute}:00.000Z` });
    const sent = [
      capture(1, '$identify', 'anon-1', { $set: { plan: 'free' } }, at(1)),
      capture(1, '$identify', 'anon-2', { $set: { plan: 'pro' } }, at(2)),
      capture(1, 'pageview', 'anon-1', {}, at(3)),
    ];
    await withEvents(rig, sent);
    const workerDb = new pg.Client({ connectionString: rig.databaseUrl });
    await workerDb.connect();
    await waitForCommitted(workerDb, sent);
    await workerDb.end();
    await new Promise((r) => setTimeout(r, 1_100));
    const events = await rig.putExport({ id: crypto.randomUUID(), destination: { type: 'Postgres', config: { ...config, table_name: 'slim' } } });
    const persons = await rig.putExport({ id: crypto.randomUUID(), model: 'persons', destination: { type: 'Postgres', config: { ...config, table_name: 'people' } } });
    const end = new Date(Date.now() - 1000).toISOString();
    const b1 = await rig.backfill(events, HOUR.start, HOUR.end);
    const b2 = await rig.backfill({ ...persons, interval_seconds: 86_400 * 7 }, new Date(Date.now() - 3_600_000).toISOString(), end);
    await rig.waitForRun('events', (l) => l.backfill_id === b1 && l.status === 'Completed', 30_000);
    await rig.waitForRun('persons', (l) => l.backfill_id === b2 && l.status === 'Completed', 30_000);
    expect((await dest.query('SELECT uuid, event FROM slim ORDER BY event')).rows).toHaveLength(3);
    const people = (await dest.query('SELECT distinct_id, properties, person_version FROM people ORDER BY distinct_id')).rows;
    expect(people.map((p) => [p.distinct_id, p.properties.plan])).toEqual([
      ['anon-1', 'free'],
      ['anon-2', 'pro'],
    ]);
    // An older version delivered later changes nothing; a newer one replaces it.
    await dest.query(`UPDATE people SET person_version = person_version + 5, properties = '{"plan":"kept"}' WHERE distinct_id = 'anon-1'`);
    const b3 = await rig.backfill({ ...persons, interval_seconds: 86_400 * 7 }, new Date(Date.now() - 3_600_000).toISOString(), new Date(Date.now() - 500).toISOString());
    await rig.waitForRun('persons again', (l) => l.backfill_id === b3 && l.status === 'Completed');
    const after = (await dest.query('SELECT distinct_id, properties FROM people ORDER BY distinct_id')).rows;
    expect(after.map((p) => p.properties.plan)).toEqual(['kept', 'pro']);
  });
});
