// The import checkpoint: what capture has acknowledged, per (project, file), so a re-run after a
// crash or Ctrl-C sends nothing that was acknowledged and skips nothing that was not.
//
// Records are spread over lanes by distinct_id (lanes.ts); each lane sends its batches one at a
// time, in file order. So everything a lane has had acknowledged is exactly "its records up to
// position W" — one watermark per lane describes the acknowledged set completely, however the
// lanes' batches interleave or complete out of order. A record is done iff
// position <= watermarks[lane(distinct_id)], with the lane count stored alongside.
//
// Before a lane sends a batch, the batch's last position is recorded (`inflight`) and written
// out; a re-run sends exactly that batch again first — the same records, so the same events and
// the same JetStream message ids, which HISTORICAL's duplicate window drops if the batch had been
// stored after all. So a resume stores nothing twice, not just "nothing acknowledged twice".
//
// The file is rewritten after every acknowledgement (coalesced: one write in flight, the next
// carries everything since), atomically (temp file, fsync, rename). A lock file keeps two
// importers from sharing it.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';

const verifiedSchema = z.object({
  /** Records 1..records (positions up to `position`) hash to sha256. */
  records: z.number().int().min(1),
  position: z.number().int().min(1),
  sha256: z.string(),
});

const fileProgressSchema = z.object({
  /** Absolute path; for stdin `-`, told apart by `head`. */
  file: z.string(),
  /**
   * SHA-256 (hex) of the first MiB of decompressed content when the import began. Event uuids
   * derive from it, so it stays fixed while the file is fixed up and resumed.
   */
  identity: z.string().regex(/^[0-9a-f]{64}$/),
  /** SHA-256 of the first MiB as last read (differs from identity after an edit in the first MiB). */
  head: z.string().regex(/^[0-9a-f]{64}$/),
  /**
   * A hash of the records the watermarks cover for sure (up to the lowest watermark): checked on
   * resume, so a file replaced or edited before that point is refused instead of skipped wrongly.
   */
  verified: verifiedSchema.nullable(),
  /** First 16 hex digits of SHA-256 of the project API key. */
  project: z.string(),
  format: z.enum(['ndjson', 'array']),
  lanes: z.number().int().min(1),
  watermarks: z.array(z.number().int().min(0)),
  /** Per lane, the last position of the batch sent and not yet acknowledged (0: none). */
  inflight: z.array(z.number().int().min(0)).optional(),
  /** Events acknowledged by capture, over every run. */
  acknowledged: z.number().int().min(0),
  complete: z.boolean(),
  updatedAt: z.string(),
});

const checkpointSchema = z.object({
  version: z.literal(1),
  files: z.array(fileProgressSchema),
});

export type FileProgress = z.infer<typeof fileProgressSchema>;
export type VerifiedPrefix = z.infer<typeof verifiedSchema>;

export class CheckpointError extends Error {
  override name = 'CheckpointError';
}

export function isDone(progress: Pick<FileProgress, 'watermarks'>, lane: number, position: number): boolean {
  return position <= progress.watermarks[lane]!;
}

export class Checkpoint {
  private writing: Promise<void> | undefined;
  private dirty = false;
  private failed: Error | undefined;
  private released = false;

  private constructor(
    readonly path: string,
    readonly files: FileProgress[],
  ) {}

  /** Loads the checkpoint at `path` (empty when missing) and locks it for this process. */
  static open(path: string): Checkpoint {
    mkdirSync(dirname(path), { recursive: true });
    acquireLock(path);
    try {
      let text: string | undefined;
      try {
        text = readFileSync(path, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      if (text === undefined) return new Checkpoint(path, []);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (err) {
        throw new CheckpointError(`${path} is not a checkpoint (not JSON: ${(err as Error).message}); move it away to start over`);
      }
      const parsed = checkpointSchema.safeParse(json);
      if (!parsed.success) throw new CheckpointError(`${path} is not a spate import checkpoint (${parsed.error.issues[0]?.message ?? 'bad shape'}); move it away to start over`);
      for (const f of parsed.data.files) {
        if (f.watermarks.length !== f.lanes) throw new CheckpointError(`${path}: ${f.file} has ${f.watermarks.length} watermarks for ${f.lanes} lanes`);
      }
      return new Checkpoint(path, parsed.data.files);
    } catch (err) {
      releaseLock(path);
      throw err;
    }
  }

  /** A file's progress: by path, or for stdin by the hash of its first MiB. */
  find(project: string, file: string, head: string): FileProgress | undefined {
    return this.files.find((f) => f.project === project && f.file === file && (file !== '-' || f.head === head));
  }

  /** Starts a file's progress afresh (replacing what was recorded for it). */
  begin(progress: Omit<FileProgress, 'updatedAt' | 'watermarks' | 'inflight' | 'acknowledged' | 'complete' | 'identity' | 'verified'>): FileProgress {
    const existing = this.find(progress.project, progress.file, progress.head);
    if (existing) this.files.splice(this.files.indexOf(existing), 1);
    const fresh: FileProgress = {
      ...progress,
      identity: progress.head,
      verified: null,
      watermarks: Array<number>(progress.lanes).fill(0),
      inflight: Array<number>(progress.lanes).fill(0),
      acknowledged: 0,
      complete: false,
      updatedAt: new Date().toISOString(),
    };
    this.files.push(fresh);
    return fresh;
  }

  /** Writes the current state; resolves once it (or a later state) is on disk. */
  save(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    this.dirty = true;
    this.writing ??= this.writeLoop().finally(() => {
      this.writing = undefined;
    });
    return this.writing;
  }

  /** The first write error, if any (saves are not always awaited). */
  get error(): Error | undefined {
    return this.failed;
  }

  private async writeLoop(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      const now = new Date().toISOString();
      const text = JSON.stringify({ version: 1, files: this.files.map((f) => ({ ...f, updatedAt: now })) }, null, 1) + '\n';
      const tmp = `${this.path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
      try {
        const handle = await open(tmp, 'w', 0o644);
        try {
          await handle.writeFile(text);
          await handle.datasync();
        } finally {
          await handle.close();
        }
        await rename(tmp, this.path);
      } catch (err) {
        await unlink(tmp).catch(() => undefined);
        this.failed = new CheckpointError(`cannot write the checkpoint ${this.path}: ${(err as Error).message}`, { cause: err });
        throw this.failed;
      }
    }
  }

  /** Final write, then unlock. */
  async close(): Promise<void> {
    if (this.released) return;
    try {
      if (!this.failed) await this.save();
    } finally {
      this.released = true;
      releaseLock(this.path);
    }
  }
}

function lockPath(path: string): string {
  return `${path}.lock`;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function acquireLock(path: string): void {
  const lock = lockPath(path);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(lock, `${process.pid}\n`, { flag: 'wx' });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = Number.NaN;
    try {
      holder = Number(readFileSync(lock, 'utf8').trim());
    } catch {
      continue; // removed meanwhile: try again
    }
    if (Number.isInteger(holder) && holder > 0 && pidAlive(holder)) {
      throw new CheckpointError(`another import (pid ${holder}) is using ${path}; wait for it, or pass another --checkpoint`);
    }
    // Left by a process that died (crash, kill -9): take it over.
    try {
      unlinkSync(lock);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  throw new CheckpointError(`cannot lock ${path} (${lock})`);
}

function releaseLock(path: string): void {
  try {
    unlinkSync(lockPath(path));
  } catch {
    // already gone
  }
}
