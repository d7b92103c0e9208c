import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generatedEvent, writeEventsFile } from '../../bench/lib/generate-events.js';
import { isUuid, type CapturedEvent } from '../../lib/index.js';
import { startIngestHarness, type IngestHarness } from '../../test/ingest-harness.js';
import { freePort, waitFor } from '../../test/kit/index.js';
import { positionOfEventUuid, runImportCli, type ImportResult } from './index.js';

const KEY = 'phc_import_test';
const root = fileURLToPath(new URL('../..', import.meta.url));
let h: IngestHarness;
let dir: string;
let checkpoint: string;

beforeAll(async () => {
  h = await startIngestHarness({}, { [KEY]: 7 });
  dir = mkdtempSync(join(tmpdir(), 'spate-import-test-'));
});
afterAll(async () => {
  await h?.stop();
  rmSync(dir, { recursive: true, force: true });
});
let testNo = 0;
beforeEach(async () => {
  await h.jsm.streams.purge('HISTORICAL');
  await h.jsm.streams.purge('EVENTS');
  checkpoint = join(dir, `checkpoint-${++testNo}.json`);
});

interface Run {
  code: number;
  result: ImportResult;
  stderr: string;
}

/** `spate import` in this process (the real CLI entry, with its output captured). */
async function importCli(args: string[], options: { stdin?: Readable; env?: Record<string, string>; url?: string; key?: string } = {}): Promise<Run> {
  const out: string[] = [];
  const err = new PassThrough();
  let stderr = '';
  err.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await runImportCli(
    [...args, '--url', options.url ?? h.url, '--key', options.key ?? KEY, '--checkpoint', checkpoint, '--progress', 'lines', '--json'],
    { out: (l) => out.push(l), err, env: options.env ?? {}, stdin: options.stdin ?? Readable.from([]), isTty: false, onSignal: () => () => undefined },
  );
  const last = out.at(-1);
  return { code, result: last ? (JSON.parse(last) as ImportResult) : (undefined as unknown as ImportResult), stderr };
}

function file(name: string, content: string | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

/** Every historical event, checked: no uuid twice, each distinct_id's events in file order. */
async function historical(): Promise<CapturedEvent[]> {
  const events = await h.events('historical');
  const uuids = new Set(events.map((e) => e.uuid));
  expect(uuids.size, 'no uuid twice').toBe(events.length);
  const last = new Map<string, number>();
  for (const e of events) {
    const index = e.properties.index as number;
    expect(index, `order of ${e.distinct_id}`).toBeGreaterThan(last.get(e.distinct_id) ?? -1);
    last.set(e.distinct_id, index);
  }
  return events;
}

const indexes = (events: CapturedEvent[]) => events.map((e) => e.properties.index as number).sort((a, b) => a - b);
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe('spate import', () => {
  it('import - NDJSON, a JSON array and gzip of each land in HISTORICAL, in file order per distinct_id, with uuids derived from file and line', async () => {
    const count = 3000;
    const ndjson = join(dir, 'a.ndjson');
    const array = join(dir, 'b.json.gz');
    await writeEventsFile(ndjson, { count, distinctIds: 50 });
    await writeEventsFile(array, { count, distinctIds: 50, format: 'array', gzip: true });
    // Small batches and 4 lanes: many requests in flight that complete out of order.
    const first = await importCli([ndjson, '--batch-size', '16KiB', '--concurrency', '4']);
    expect(first.code, first.stderr).toBe(0);
    expect(first.result).toMatchObject({ status: 'done', sent: count, invalid: 0, files: [{ outcome: 'imported', format: 'ndjson', gzip: false, sent: count }] });
    let events = await historical();
    expect(indexes(events)).toEqual(range(0, count));
    for (const e of events) {
      const expected = generatedEvent(e.properties.index as number, 50);
      expect(e).toMatchObject({ event: expected.event, distinct_id: expected.distinct_id, timestamp: expected.timestamp, project_id: 7, token: KEY });
      expect(isUuid(e.uuid)).toBe(true);
      expect(positionOfEventUuid(e.uuid)).toBe((e.properties.index as number) + 1); // NDJSON: line number
    }
    await expect(h.messages('historical').then((m) => m.every((x) => x.subject.startsWith('historical.7.')))).resolves.toBe(true);

    await h.jsm.streams.purge('HISTORICAL');
    const second = await importCli([array, '--batch-size', '16KiB']);
    expect(second.code, second.stderr).toBe(0);
    expect(second.result.files[0]).toMatchObject({ outcome: 'imported', format: 'array', gzip: true, sent: count });
    events = await historical();
    expect(indexes(events)).toEqual(range(0, count));
    expect(events.every((e) => positionOfEventUuid(e.uuid) === (e.properties.index as number) + 1)).toBe(true); // array: element index
    expect(await h.totalMessages()).toBe((await h.messages('historical')).length); // nothing realtime
  });

  it('import - a finished file is not sent again; --restart sends it again with the same uuids', async () => {
    const path = join(dir, 'again.ndjson');
    await writeEventsFile(path, { count: 500 });
    expect((await importCli([path])).result.sent).toBe(500);
    const before = (await h.events('historical')).map((e) => e.uuid).sort();
    const again = await importCli([path]);
    expect(again.code).toBe(0);
    expect(again.result).toMatchObject({ sent: 0, files: [{ outcome: 'already-imported', acknowledgedTotal: 500 }] });
    expect(again.stderr).toContain('already imported');
    expect((await h.events('historical')).length).toBe(500);
    const restarted = await importCli([path, '--restart']);
    expect(restarted.result.sent).toBe(500);
    const after = (await h.events('historical')).map((e) => e.uuid);
    expect(new Set(after)).toEqual(new Set(before));
  });

  it('import - reads stdin (gzip told by content), and knows the same data piped again', async () => {
    const lines = range(0, 200).map((i) => JSON.stringify(generatedEvent(i))).join('\n') + '\n';
    const viaStdin = await importCli(['-'], { stdin: Readable.from([gzipSync(lines)]) });
    expect(viaStdin.code, viaStdin.stderr).toBe(0);
    expect(viaStdin.result.files[0]).toMatchObject({ file: '-', gzip: true, outcome: 'imported', sent: 200 });
    const again = await importCli(['-'], { stdin: Readable.from([Buffer.from(lines)]) });
    expect(again.result.files[0]).toMatchObject({ outcome: 'already-imported' });
    expect(indexes(await historical())).toEqual(range(0, 200));
  });

  it('import - invalid lines are reported by line number and reason and skipped with --invalid skip', async () => {
    const good = (i: number) => JSON.stringify(generatedEvent(i));
    const lines = [good(0), '{"event":', good(1), '{"event":"x"}', '[1,2]', good(2), '{"event":"x","distinct_id":""}', '', good(3), '{"event":"x","distinct_id":"u","uuid":"nope"}', good(4)];
    const path = file('bad.ndjson', lines.join('\n'));
    const rejects = join(dir, 'rejects.ndjson');
    const run = await importCli([path, '--invalid', 'skip', '--rejects', rejects]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ status: 'done', sent: 5, invalid: 5 });
    expect(run.stderr).toContain(`${path}:2: skipped: not valid JSON`);
    expect(run.stderr).toContain(`${path}:4: skipped: no distinct_id`);
    expect(run.stderr).toContain(`${path}:5: skipped: not a JSON object`);
    expect(run.stderr).toContain(`${path}:7: skipped: distinct_id is empty`);
    expect(run.stderr).toContain(`${path}:10: skipped: \`uuid\` must be a UUID string`);
    const rejected = readFileSync(rejects, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { line: number; reason: string; record: string });
    expect(rejected.map((r) => r.line)).toEqual([2, 4, 5, 7, 10]);
    expect(rejected[0]!.record).toBe('{"event":');
    expect(indexes(await historical())).toEqual([0, 1, 2, 3, 4]);
  });

  it('import - by default an invalid line stops the run after the lines before it; fixed, a re-run sends the rest and nothing twice', async () => {
    const lines = range(0, 400).map((i) => JSON.stringify(generatedEvent(i, 20)));
    lines[250] = '{"event":"broken","properties":{}}';
    const path = file('stop.ndjson', lines.join('\n') + '\n');
    const stopped = await importCli([path, '--batch-size', '8KiB']);
    expect(stopped.code).toBe(1);
    expect(stopped.result.status).toBe('failed');
    expect(stopped.result.error).toMatchObject({ file: path, line: 251 });
    expect(stopped.result.error?.message).toContain('no distinct_id');
    expect(indexes(await historical())).toEqual(range(0, 250));

    lines[250] = JSON.stringify(generatedEvent(250, 20));
    writeFileSync(path, lines.join('\n') + '\n');
    const resumed = await importCli([path, '--batch-size', '8KiB']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.result.files[0]).toMatchObject({ outcome: 'imported', sent: 150, skipped: 250, acknowledgedTotal: 400 });
    const events = await historical();
    expect(indexes(events)).toEqual(range(0, 400));
    // The fix changed the file's first MiB, yet its uuids still derive from the identity it began with.
    expect(new Set(events.map((e) => e.uuid.slice(0, 23))).size).toBe(1);
  });

  it('import - a file changed before the point a partial import reached is refused unless --restart', async () => {
    const lines = range(0, 100).map((i) => JSON.stringify(generatedEvent(i)));
    lines[60] = '{}';
    const path = file('changed.ndjson', lines.join('\n'));
    expect((await importCli([path])).code).toBe(1);
    writeFileSync(path, ['{"event":"new first line","distinct_id":"z"}', ...lines.slice(0, 60)].join('\n'));
    const refused = await importCli([path]);
    expect(refused.code).toBe(1);
    expect(refused.result.error?.message).toMatch(/changed before line \d+ since it was partly imported.*--restart/);
    expect(refused.result.sent).toBe(0);
    const restarted = await importCli([path, '--restart']);
    expect(restarted.code, restarted.stderr).toBe(0);
    expect(restarted.result.sent).toBe(61);
  });

  it('import - a missing input stops the run before anything is sent', async () => {
    const path = join(dir, 'present.ndjson');
    await writeEventsFile(path, { count: 10 });
    const run = await importCli([path, join(dir, 'absent.ndjson')]);
    expect(run.code).toBe(1);
    expect(run.result.error?.message).toMatch(/cannot read .*absent.ndjson: no such file/);
    expect(await h.totalMessages()).toBe(0);
  });

  it('import - an unknown project key stops the run at once with capture\'s reason', async () => {
    const path = join(dir, 'key.ndjson');
    await writeEventsFile(path, { count: 100 });
    const run = await importCli([path], { key: 'phc_nobody_has_this' });
    expect(run.code).toBe(1);
    expect(run.result.error?.message).toContain('401 unknown_api_key');
    expect(run.result.sent).toBe(0);
    expect(await h.totalMessages()).toBe(0);
  });

  it('import - a record capture refuses is isolated by splitting its batch, reported by line, and the rest is imported', async () => {
    await using small = await startIngestHarness({ PUBLISH_MAX_MESSAGE_BYTES: '64KiB' }, { [KEY]: 7 });
    const lines = range(0, 300).map((i) => JSON.stringify(generatedEvent(i)));
    const big = generatedEvent(123);
    big.properties.blob = 'x'.repeat(100 * 1024); // valid for the importer, too large for this node
    lines[123] = JSON.stringify(big);
    const path = file('too-large.ndjson', lines.join('\n'));
    const run = await importCli([path, '--invalid', 'skip', '--concurrency', '2'], { url: small.url });
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ sent: 299, invalid: 1 });
    expect(run.stderr).toMatch(new RegExp(`${path}:124: skipped: capture refused it: 413 event_too_large`));
    const stored = (await small.events('historical')).map((e) => e.properties.index as number).sort((a, b) => a - b);
    expect(stored).toEqual(range(0, 300).filter((i) => i !== 123));
  });

  it('import - an event larger than 1 MiB is imported into a cluster that takes it (PUBLISH_MAX_MESSAGE_BYTES raised)', async () => {
    await using large = await startIngestHarness({ PUBLISH_MAX_MESSAGE_BYTES: '4MiB' }, { [KEY]: 7 });
    const big = generatedEvent(1);
    big.properties.blob = 'x'.repeat(2 * 1024 * 1024); // the importer used to refuse it: "capture accepts at most 1048576"
    const path = file('large-cluster.ndjson', [generatedEvent(0), big, generatedEvent(2)].map((e) => JSON.stringify(e)).join('\n'));
    const run = await importCli([path], { url: large.url });
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ sent: 3, invalid: 0 });
    const stored = await large.events('historical');
    expect(stored.map((e) => e.properties.index as number).sort((a, b) => a - b)).toEqual([0, 1, 2]);
    expect((stored.find((e) => e.properties.index === 1)!.properties.blob as string).length).toBe(2 * 1024 * 1024);
  });

  it('import - retries through a NATS outage (503) and finishes when the cluster is back', async () => {
    const path = join(dir, 'outage.ndjson');
    await writeEventsFile(path, { count: 2000 });
    await h.nats.kill();
    const running = importCli([path, '--batch-size', '32KiB']);
    await new Promise((r) => setTimeout(r, 2_500));
    await h.nats.restart();
    const run = await running;
    expect(run.code, run.stderr).toBe(0);
    expect(run.result.retries).toBeGreaterThan(0);
    expect(run.stderr).toMatch(/capture answered 503 (unavailable|overloaded)/);
    expect(indexes(await historical())).toEqual(range(0, 2000));
  });

  it('import - gives up after --retry-for when capture stays unreachable, saving progress', async () => {
    const path = join(dir, 'down.ndjson');
    await writeEventsFile(path, { count: 10 });
    const run = await importCli([path, '--retry-for', '1s'], { url: `http://127.0.0.1:${await freePort()}` });
    expect(run.code).toBe(1);
    expect(run.result.error?.message).toMatch(/gave up on a batch .*still failing after 1s of retries: network: ECONNREFUSED/);
    expect(JSON.parse(readFileSync(checkpoint, 'utf8')).files[0]).toMatchObject({ acknowledged: 0, complete: false });
  });

  it('import - --gzip sends gzip bodies that capture stores the same', async () => {
    const path = join(dir, 'gz-bodies.ndjson');
    await writeEventsFile(path, { count: 1500 });
    const run = await importCli([path, '--gzip', '--batch-size', '64KiB']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.result.sent).toBe(1500);
    expect(indexes(await historical())).toEqual(range(0, 1500));
  });

  it('import - Ctrl-C stops a real `spate import` after its requests in flight and saves progress (exit 130); the same command resumes with nothing sent twice', async () => {
    const path = join(dir, 'interrupt.ndjson');
    await writeEventsFile(path, { count: 60_000 });
    const args = ['--import', 'tsx', 'cli/spate.ts', 'import', path, '--url', h.url, '--key', KEY, '--checkpoint', checkpoint, '--batch-size', '64KiB', '--concurrency', '2', '--progress', 'lines'];
    const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await waitFor('some events acknowledged', () => {
      try {
        return (JSON.parse(readFileSync(checkpoint, 'utf8')) as { files: { acknowledged: number }[] }).files[0]!.acknowledged > 0;
      } catch {
        return false;
      }
    });
    child.kill('SIGINT');
    expect(await exited, stderr).toBe(130);
    expect(stderr).toContain('SIGINT: finishing requests in flight and saving progress');
    expect(stdout).toContain('interrupted: progress is saved; run the same command again to resume');
    expect(existsSync(`${checkpoint}.lock`)).toBe(false);
    const saved = (JSON.parse(readFileSync(checkpoint, 'utf8')) as { files: { acknowledged: number; complete: boolean }[] }).files[0]!;
    expect(saved.complete).toBe(false);
    expect(saved.acknowledged).toBeLessThan(60_000);
    const resumed = await importCli([path, '--batch-size', '64KiB', '--concurrency', '2']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.result.files[0]).toMatchObject({ skipped: saved.acknowledged, sent: 60_000 - saved.acknowledged });
    // A graceful stop leaves nothing unacknowledged behind: not even a copy.
    expect(indexes(await historical())).toEqual(range(0, 60_000));
  });

  it('import - two importers cannot use one checkpoint at once', async () => {
    const path = join(dir, 'lock.ndjson');
    await writeEventsFile(path, { count: 20_000 });
    const a = importCli([path, '--batch-size', '8KiB', '--concurrency', '1']);
    await new Promise((r) => setTimeout(r, 300));
    const b = await importCli([path]);
    expect(b.code).toBe(1);
    expect(b.result.error?.message).toMatch(/another import \(pid \d+\) is using/);
    expect((await a).code).toBe(0);
  });
});
