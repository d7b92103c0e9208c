import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Checkpoint, CheckpointError } from './checkpoint.js';

const dir = mkdtempSync(join(tmpdir(), 'spate-checkpoint-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const head = 'a'.repeat(64);

describe('import checkpoint', () => {
  it('import checkpoint - saves atomically and reads back what was recorded', async () => {
    const path = join(dir, 'c1.json');
    const c = Checkpoint.open(path);
    const p = c.begin({ file: '/data/x.ndjson', head, project: 'p1', format: 'ndjson', lanes: 3 });
    expect(p).toMatchObject({ identity: head, watermarks: [0, 0, 0], acknowledged: 0, complete: false, verified: null });
    p.watermarks[1] = 42;
    p.acknowledged = 10;
    // Saves issued while one is being written coalesce; the last state wins.
    await Promise.all([c.save(), c.save(), c.save()]);
    await c.close();
    expect(existsSync(`${path}.lock`)).toBe(false);
    const again = Checkpoint.open(path);
    expect(again.find('p1', '/data/x.ndjson', 'b'.repeat(64))).toMatchObject({ watermarks: [0, 42, 0], acknowledged: 10 });
    expect(again.find('p2', '/data/x.ndjson', head)).toBeUndefined();
    await again.close();
  });

  it('import checkpoint - stdin entries are told apart by the hash of their first MiB', async () => {
    const c = Checkpoint.open(join(dir, 'c2.json'));
    c.begin({ file: '-', head, project: 'p', format: 'ndjson', lanes: 1 });
    expect(c.find('p', '-', head)).toBeDefined();
    expect(c.find('p', '-', 'c'.repeat(64))).toBeUndefined();
    await c.close();
  });

  it('import checkpoint - a file that is not a checkpoint is refused, not overwritten', () => {
    const path = join(dir, 'c3.json');
    writeFileSync(path, '{"version":2}');
    expect(() => Checkpoint.open(path)).toThrow(/is not a spate import checkpoint/);
    writeFileSync(path, 'garbage');
    expect(() => Checkpoint.open(path)).toThrow(CheckpointError);
    expect(readFileSync(path, 'utf8')).toBe('garbage');
    expect(existsSync(`${path}.lock`)).toBe(false);
  });

  it('import checkpoint - a lock held by a live process refuses; one left by a dead process is taken over', async () => {
    const path = join(dir, 'c4.json');
    const live = Checkpoint.open(path);
    expect(() => Checkpoint.open(path)).toThrow(/another import \(pid \d+\) is using/);
    await live.close();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    writeFileSync(`${path}.lock`, `${dead.stdout}\n`);
    const taken = Checkpoint.open(path);
    expect(readFileSync(`${path}.lock`, 'utf8').trim()).toBe(String(process.pid));
    await taken.close();
  });
});
