// A running SHA-256 over a file's records, snapshotted now and then, so a resumed import can
// check that the part the checkpoint covers is still what was sent (checkpoint.ts, `verified`).
// Snapshots at record counts 1, 2, 4, … 4096 and then every 4096th record.
import { createHash, type Hash } from 'node:crypto';
import type { VerifiedPrefix } from './checkpoint.js';

const EVERY = 4096;

const isSnapshotCount = (n: number) => (n <= EVERY ? (n & (n - 1)) === 0 : n % EVERY === 0);

export class PrefixHasher {
  private readonly hash: Hash = createHash('sha256');
  private records = 0;
  private snapshots: VerifiedPrefix[] = [];
  private checked = false;

  constructor(private readonly expected: VerifiedPrefix | null) {}

  /** Adds the next record; returns false when the file differs from the expected prefix. */
  add(position: number, bytes: Buffer): boolean {
    // Records only, no separators: a moved boundary changes positions, which are compared too.
    this.hash.update(bytes);
    this.records++;
    if (!isSnapshotCount(this.records)) return true;
    const snapshot = { records: this.records, position, sha256: this.hash.copy().digest('hex') };
    this.snapshots.push(snapshot);
    if (this.expected && this.records === this.expected.records) {
      this.checked = true;
      return snapshot.position === this.expected.position && snapshot.sha256 === this.expected.sha256;
    }
    return true;
  }

  /** True while an expected prefix has not been reached (at the end: the file got shorter). */
  get pending(): boolean {
    return this.expected !== null && !this.checked;
  }

  /** The longest snapshot that ends at or before `position` (older ones are dropped). */
  coveredUpTo(position: number): VerifiedPrefix | undefined {
    let best = -1;
    for (let i = 0; i < this.snapshots.length && this.snapshots[i]!.position <= position; i++) best = i;
    if (best < 0) return undefined;
    const snapshot = this.snapshots[best]!;
    this.snapshots = this.snapshots.slice(best);
    return snapshot;
  }
}
