// The importer's promise, tested the hard way: a real `spate import` process is killed with
// SIGKILL halfway through a large file, then run again. Every event must then be in HISTORICAL
// exactly once, in file order per distinct_id. Batches in flight at the kill (sent, maybe
// stored, not acknowledged) are sent again exactly as they were, so capture makes the same
// messages under the same ids and JetStream keeps one copy.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatedEvent, writeEventsFile } from '../../bench/lib/generate-events.js';
import { parseNdjson, type CapturedEvent } from '../../lib/index.js';
import { startIngestHarness, type IngestHarness } from '../../test/ingest-harness.js';
import { waitFor } from '../../test/kit/index.js';
import type { FileProgress } from './checkpoint.js';
import { laneOf, positionOfEventUuid, type ImportResult } from './index.js';

/** 1M by default, as the issue asks; SPATE_IMPORT_TEST_EVENTS lowers it on a slow machine. */
const COUNT = Number(process.env.SPATE_IMPORT_TEST_EVENTS ?? 1_000_000);
const DISTINCT_IDS = 10_000;
const KEY = 'phc_resume_test';
const root = fileURLToPath(new URL('../..', import.meta.url));

let h: IngestHarness;
let dir: string;

beforeAll(async () => {
  h = await startIngestHarness({ PARSE_THREADS: '2' }, { [KEY]: 3 });
  dir = mkdtempSync(join(tmpdir(), 'spate-resume-test-'));
});
afterAll(async () => {
  await h?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function startImport(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cli/spate.ts', 'import', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

function readProgress(path: string): FileProgress | undefined {
  try {
    return (JSON.parse(readFileSync(path, 'utf8')) as { files: FileProgress[] }).files[0];
  } catch {
    return undefined; // not written yet
  }
}

describe('spate import resume', () => {
  it(`import resume - killed (SIGKILL) halfway through ${COUNT.toLocaleString('en-US')} events and run again: every event in HISTORICAL exactly once, in order per distinct_id`, async () => {
    const started = performance.now();
    const phase = (name: string) => console.log(`resume test: ${name} at ${((performance.now() - started) / 1000).toFixed(1)}s`);
    const file = join(dir, 'events.ndjson.gz');
    await writeEventsFile(file, { count: COUNT, distinctIds: DISTINCT_IDS, gzip: true });
    const checkpoint = join(dir, 'checkpoint.json');
    const args = [file, '--url', h.url, '--key', KEY, '--checkpoint', checkpoint, '--progress', 'none', '--json'];

    phase('file written');
    const first = startImport(args);
    await waitFor('half the events acknowledged', () => (readProgress(checkpoint)?.acknowledged ?? 0) >= COUNT / 2 || first.child.exitCode !== null, 300_000);
    first.child.kill('SIGKILL');
    await first.exited;
    expect(first.child.signalCode, first.output().stderr).toBe('SIGKILL');
    const atKill = readProgress(checkpoint)!;
    expect(atKill.complete).toBe(false);
    expect(atKill.acknowledged).toBeGreaterThanOrEqual(COUNT / 2);
    expect(existsSync(`${checkpoint}.lock`)).toBe(true); // left behind by the killed process
    // Batches were in flight at the kill: the second run must send them again without storing them twice.
    expect(atKill.inflight?.some((end, lane) => end > atKill.watermarks[lane]!)).toBe(true);

    phase(`killed with ${atKill.acknowledged} acknowledged`);
    const second = startImport(args);
    const code = await second.exited;
    expect(code, second.output().stderr).toBe(0);
    const result = JSON.parse(second.output().stdout.trim().split('\n').at(-1)!) as ImportResult;
    // Nothing acknowledged before the kill was sent again; everything else was.
    expect(result.files[0]).toMatchObject({ outcome: 'imported', skipped: atKill.acknowledged, sent: COUNT - atKill.acknowledged, acknowledgedTotal: COUNT });

    phase('second run finished');
    // Read HISTORICAL back in stream order, message by message (a few thousand messages).
    const info = await h.jsm.streams.info('HISTORICAL');
    const seen = new Uint8Array(COUNT);
    const uuids = new Map<number, string>();
    const lastIndex = new Map<string, number>();
    let total = 0;
    const problems: string[] = [];
    const problem = (text: string) => {
      if (problems.length < 20) problems.push(text);
    };
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await h.jsm.streams.getMessage('HISTORICAL', { seq });
      if (!m) continue;
      for (const e of parseNdjson<CapturedEvent>(m.data)) {
        total++;
        const index = e.properties.index as number;
        const expected = generatedEvent(index, DISTINCT_IDS);
        if (e.distinct_id !== expected.distinct_id) problem(`event ${index}: distinct_id ${e.distinct_id}, expected ${expected.distinct_id}`);
        if (positionOfEventUuid(e.uuid) !== index + 1) problem(`event ${index}: uuid ${e.uuid} is not line ${index + 1}'s`);
        if (seen[index]! > 0) {
          const lane = laneOf(e.distinct_id, atKill.lanes);
          const acknowledged = index + 1 <= atKill.watermarks[lane]!;
          problem(`event ${index} (line ${index + 1}) is in HISTORICAL twice (${acknowledged ? 'acknowledged' : 'not acknowledged'} before the kill)`);
        } else {
          uuids.set(index, e.uuid);
          if (index <= (lastIndex.get(e.distinct_id) ?? -1)) problem(`${e.distinct_id}: event ${index} after event ${lastIndex.get(e.distinct_id)}`);
          lastIndex.set(e.distinct_id, index);
        }
        seen[index] = Math.min(255, seen[index]! + 1);
      }
    }
    expect(problems).toEqual([]);
    phase('stream read');
    expect(seen.indexOf(0), 'an event is missing').toBe(-1);
    expect(uuids.size).toBe(COUNT);
    expect(total).toBe(COUNT);
    const duplicates = await h.metric('spate_ingest_publish_duplicates_total');
    console.log(`resume test: ${COUNT} events, ${atKill.acknowledged} acknowledged at the kill, ${result.sent} sent after resume in ${(result.elapsedMs / 1000).toFixed(1)}s; ${duplicates} messages JetStream dropped as already stored`);
  }, 900_000);
});
