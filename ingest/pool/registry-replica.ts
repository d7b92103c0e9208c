// Parse threads need the project key registry too (events carry project_id). The main thread
// broadcasts full snapshots on a BroadcastChannel; each thread keeps the latest, and a task
// waits until its copy is at least as new as the registry the request was admitted under.
import { BroadcastChannel } from 'node:worker_threads';
import type { ProjectRecord } from '../../lib/index.js';
import { CaptureError } from '../errors.js';
import type { RegistrySnapshot } from '../token-registry.js';

export type ReplicaMessage = { type: 'hello' } | { type: 'snapshot'; snapshot: RegistrySnapshot };

export interface RegistryReplicaOptions {
  /** Sent as Retry-After when this copy does not catch up in time (RETRY_AFTER_SECONDS). */
  retryAfterSeconds: number;
  /** How long a task waits for this copy to catch up. */
  waitMs?: number;
}

const WAIT_MS = 5_000;

export class RegistryReplica {
  private projects = new Map<string, ProjectRecord>();
  private version = -1;
  private waiters: { version: number; resolve: () => void }[] = [];
  private readonly channel: BroadcastChannel;

  constructor(
    channelName: string,
    private readonly options: RegistryReplicaOptions,
  ) {
    this.channel = new BroadcastChannel(channelName);
    this.channel.unref();
    this.channel.onmessage = (event) => this.receive((event as { data: ReplicaMessage }).data);
    this.channel.postMessage({ type: 'hello' } satisfies ReplicaMessage);
  }

  lookup = (token: string): ProjectRecord | undefined => this.projects.get(token);

  /**
   * Resolves once this copy has `version` or newer. A copy that does not catch up in time is a
   * transient state of this node (a busy main thread, a thread just replaced), not the client's
   * fault: 503 `unavailable` with Retry-After, like the other transient failures.
   */
  async atLeast(version: number): Promise<void> {
    if (this.version >= version) return;
    const waitMs = this.options.waitMs ?? WAIT_MS;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(
          new CaptureError('unavailable', `project key registry v${version} did not reach this parse thread within ${waitMs} ms, please retry`, {
            headers: { 'Retry-After': String(this.options.retryAfterSeconds) },
          }),
        );
      }, waitMs);
      const waiter = { version, resolve: () => (clearTimeout(timer), resolve()) };
      this.waiters.push(waiter);
      // Ask again: the first hello may have been posted before the main thread listened.
      this.channel.postMessage({ type: 'hello' } satisfies ReplicaMessage);
    });
  }

  close(): void {
    this.channel.close();
  }

  private receive(message: ReplicaMessage): void {
    if (message.type !== 'snapshot' || message.snapshot.version <= this.version) return;
    this.projects = new Map(message.snapshot.entries);
    this.version = message.snapshot.version;
    const pending = this.waiters;
    this.waiters = [];
    for (const w of pending) {
      if (this.version >= w.version) w.resolve();
      else this.waiters.push(w);
    }
  }
}
