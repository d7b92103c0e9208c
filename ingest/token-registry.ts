// Project API keys this node accepts, held in memory and fed by the `spate-projects` KV bucket
// (the admin server writes it). A key added or removed there takes effect here within a second.
import { Kvm, KvWatchInclude, type KV, type KvEntry } from '@nats-io/kv';
import { PROJECTS_BUCKET, retryUnanswered, type Logger, type NatsConnection, type ProjectRecord } from '../lib/index.js';

export interface RegistrySnapshot {
  version: number;
  entries: [token: string, record: ProjectRecord][];
}

export class TokenRegistry {
  private readonly projects = new Map<string, ProjectRecord>();
  private readonly revisions = new Map<string, number>();
  private readonly listeners = new Set<() => void>();
  private version = 0;
  private loaded = false;
  private stopped = false;
  private kv: KV | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly replicas: number,
    private readonly log: Logger,
  ) {}

  get ready(): boolean {
    return this.loaded;
  }

  get size(): number {
    return this.projects.size;
  }

  /** Bumped on every change, so threads holding a copy can tell whether theirs is current. */
  get currentVersion(): number {
    return this.version;
  }

  lookup = (token: string): ProjectRecord | undefined => this.projects.get(token);

  snapshot(): RegistrySnapshot {
    return { version: this.version, entries: [...this.projects.entries()] };
  }

  onChange(listener: () => void): void {
    this.listeners.add(listener);
  }

  /** Loads every key, then keeps following changes until stop(). Resolves once loaded. */
  async start(): Promise<void> {
    const kv = await retryUnanswered('projects bucket', () => new Kvm(this.nc).create(PROJECTS_BUCKET, { history: 1, replicas: this.replicas }), this.log);
    this.kv = kv;
    await retryUnanswered('project keys', () => this.load(kv), this.log);
  }

  stop(): void {
    this.stopped = true;
  }

  private async load(kv: KV): Promise<void> {
    // Watch first, then read the current values: an update racing the read is applied by
    // revision, so neither can overwrite a newer value with an older one.
    const watcher = await kv.watch({ include: KvWatchInclude.UpdatesOnly });
    const present = new Set<string>();
    try {
      const keys: string[] = [];
      for await (const key of await kv.keys()) keys.push(key);
      for (const key of keys) {
        const entry = await kv.get(key);
        if (entry) {
          this.apply(entry);
          present.add(key);
        }
      }
    } catch (err) {
      // Tried again with a new watch: this one would be left open, unread.
      watcher.stop();
      throw err;
    }
    // After a reconnect, keys deleted while we were away are gone from `keys()`.
    for (const token of [...this.projects.keys()]) if (!present.has(token)) this.remove(token);
    this.loaded = true;
    this.changed();
    void this.follow(kv, watcher);
  }

  private async follow(kv: KV, watcher: AsyncIterable<KvEntry>): Promise<void> {
    try {
      for await (const entry of watcher) {
        if (this.stopped) break;
        this.apply(entry);
        this.changed();
      }
    } catch (err) {
      this.log.warn({ err }, 'project key watch failed');
    }
    if (this.stopped) return;
    // The watch ended (e.g. the server went away for good): reload once NATS is back.
    this.log.warn('project key watch ended; reloading');
    for (;;) {
      if (this.stopped) return;
      try {
        await this.load(kv);
        return;
      } catch (err) {
        this.log.warn({ err }, 'reloading project keys failed; retrying');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private apply(entry: KvEntry): void {
    const known = this.revisions.get(entry.key);
    if (known !== undefined && known >= entry.revision) return;
    this.revisions.set(entry.key, entry.revision);
    if (entry.operation !== 'PUT') {
      this.projects.delete(entry.key);
      return;
    }
    try {
      const record = entry.json<ProjectRecord>();
      if (Number.isInteger(record.projectId)) this.projects.set(entry.key, record);
      else this.log.warn({ key: entry.key }, 'ignoring project key without an integer projectId');
    } catch (err) {
      this.log.warn({ err, key: entry.key }, 'ignoring unreadable project key entry');
    }
  }

  private remove(token: string): void {
    this.projects.delete(token);
    this.revisions.delete(token);
  }

  private changed(): void {
    this.version++;
    for (const listener of this.listeners) listener();
  }
}
