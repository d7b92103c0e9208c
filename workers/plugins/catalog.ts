// The plugin configs as the admin server publishes them, and this worker's instances of them
// (docs/plugins.md, "Lifecycle"): the KV bucket spate-plugin-configs (project → its enabled
// configs, in order) followed live, the code from spate-plugin-sources, one PluginInstance per
// config created on first use and torn down when its config, plugin or code changes, when it is
// disabled or deleted, or when the worker stops.
import { setTimeout as sleep } from 'node:timers/promises';
import { Kvm, type KV } from '@nats-io/kv';
import { PLUGIN_CONFIGS_BUCKET, PLUGIN_SOURCES_BUCKET, type Logger, type NatsConnection, type PluginConfigsRecord } from '../../lib/index.js';
import { errorText, followBucket } from '../coordination/index.js';
import { instanceVersion, PluginInstance, type InstanceContext, type PluginConfigEntry } from './instance.js';

/** How long an instance waits for code its config names but the sources bucket lacks yet. */
const CODE_WAIT_MS = 30_000;

function hasMethod(entry: PluginConfigEntry, method: string): boolean {
  const methods = entry.plugin.capabilities.methods;
  return Array.isArray(methods) && methods.includes(method);
}

export class PluginCatalog {
  private readonly records = new Map<number, PluginConfigsRecord>();
  private readonly transforms = new Map<number, PluginConfigEntry[]>();
  private readonly instances = new Map<number, PluginInstance>();
  private readonly codes = new Map<string, string>();
  private readonly listeners = new Set<(teamId: number) => void>();
  private sources: KV | undefined;
  private watcher: { stop(): void } | undefined;
  private stopped = false;
  private ctx!: InstanceContext;

  private constructor(private readonly logger: Logger) {}

  /**
   * Loads every project's configs, then follows the bucket. Resolves once the first state is
   * loaded (or the bucket is known not to exist yet: no config can exist then), so no batch runs
   * before the transformations it must run are known.
   */
  static async open(nc: NatsConnection, ctx: Omit<InstanceContext, 'code'>, logger: Logger): Promise<PluginCatalog> {
    const catalog = new PluginCatalog(logger);
    catalog.ctx = { ...ctx, code: (hash) => catalog.code(hash) };
    const kvm = new Kvm(nc);
    for (let attempt = 0; ; attempt++) {
      try {
        const kv = await kvm.open(PLUGIN_CONFIGS_BUCKET);
        await kv.status();
        await catalog.follow(kv);
        break;
      } catch (err) {
        if (/stream not found|not found/i.test(errorText(err))) {
          logger.info(`no KV bucket ${PLUGIN_CONFIGS_BUCKET} yet (the admin server creates it): no plugin configs until it exists`);
          void catalog.waitForBucket(kvm);
          break;
        }
        if (attempt >= 20) throw err;
        logger.warn({ err: errorText(err) }, `reading ${PLUGIN_CONFIGS_BUCKET} failed: trying again`);
        await sleep(500);
      }
    }
    return catalog;
  }

  /** The project's enabled configs whose plugin transforms events (processEvent), in order. */
  transformations(teamId: number): readonly PluginConfigEntry[] | undefined {
    return this.transforms.get(teamId);
  }

  /** True when no project has a transformation (the hook then costs nothing). */
  get noTransformations(): boolean {
    return this.transforms.size === 0;
  }

  /** Every project's enabled configs (for roles that run other methods: destinations, tasks). */
  *configs(): Iterable<{ teamId: number; entry: PluginConfigEntry }> {
    for (const [teamId, record] of this.records) for (const entry of record.configs) yield { teamId, entry };
  }

  /** Told the project id whenever a project's configs change. Returns the unsubscribe. */
  subscribe(listener: (teamId: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The instance of a config on this worker, created (and set up in the background) on first use;
   * a config whose version changed gets a new one, the old one torn down.
   */
  acquire(teamId: number, entry: PluginConfigEntry): PluginInstance {
    const current = this.instances.get(entry.id);
    if (current && current.version === instanceVersion(entry) && current.teamId === teamId) return current;
    if (current) void this.retire(current);
    const instance = new PluginInstance(teamId, entry, this.ctx);
    this.instances.set(entry.id, instance);
    return instance;
  }

  /** Instances by state (the metrics gauge). */
  counts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const i of this.instances.values()) out.set(i.state, (out.get(i.state) ?? 0) + 1);
    return out;
  }

  /** Stops following the bucket and tears every instance down (teardownPlugin). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher?.stop();
    const all = [...this.instances.values()];
    this.instances.clear();
    await Promise.all(all.map((i) => i.stop()));
  }

  // --- internals ----------------------------------------------------------------------------------

  private async retire(instance: PluginInstance): Promise<void> {
    if (this.instances.get(instance.configId) === instance) this.instances.delete(instance.configId);
    await instance.stop().catch((err: unknown) => this.logger.warn({ err: errorText(err), configId: instance.configId }, 'stopping a plugin instance failed'));
  }

  private async waitForBucket(kvm: Kvm): Promise<void> {
    while (!this.stopped) {
      await sleep(2_000);
      try {
        const kv = await kvm.open(PLUGIN_CONFIGS_BUCKET);
        await kv.status();
        await this.follow(kv);
        return;
      } catch {
        // Not there yet.
      }
    }
  }

  private async follow(kv: KV): Promise<void> {
    this.watcher = await followBucket(kv, { put: (key, text) => this.apply(key, text), remove: (key) => this.remove(key) }, { stopped: () => this.stopped, logger: this.logger, what: 'plugin configs' });
  }

  private apply(key: string, text: string): void {
    let record: PluginConfigsRecord;
    try {
      record = JSON.parse(text) as PluginConfigsRecord;
      if (String(record.team_id) !== key || !Array.isArray(record.configs)) throw new Error('not a plugin configs record');
    } catch (err) {
      this.logger.warn({ key, err: errorText(err) }, 'plugin configs record left out: not readable');
      return;
    }
    this.records.set(record.team_id, record);
    const transforms = record.configs.filter((c) => hasMethod(c, 'processEvent') && c.plugin.source_hash);
    if (transforms.length > 0) this.transforms.set(record.team_id, transforms);
    else this.transforms.delete(record.team_id);
    this.retireMissing(record.team_id, record.configs);
    for (const l of this.listeners) l(record.team_id);
  }

  private remove(key: string): void {
    const teamId = Number(key);
    if (!this.records.delete(teamId)) return;
    this.transforms.delete(teamId);
    this.retireMissing(teamId, []);
    for (const l of this.listeners) l(teamId);
  }

  /** Instances of the project whose config is gone or changed: torn down. */
  private retireMissing(teamId: number, configs: readonly PluginConfigEntry[]): void {
    const versions = new Map(configs.map((c) => [c.id, instanceVersion(c)]));
    for (const instance of this.instances.values()) {
      if (instance.teamId === teamId && versions.get(instance.configId) !== instance.version) void this.retire(instance);
    }
  }

  /** The compiled code under `hash`, waiting a while for it (the bucket may lag the record). */
  private async code(hash: string): Promise<string | undefined> {
    const cached = this.codes.get(hash);
    if (cached !== undefined) return cached;
    const deadline = Date.now() + CODE_WAIT_MS;
    while (!this.stopped) {
      try {
        this.sources ??= await new Kvm(this.ctx.nc).open(PLUGIN_SOURCES_BUCKET);
        const entry = await this.sources.get(hash);
        if (entry?.operation === 'PUT') {
          const code = entry.string();
          this.codes.set(hash, code);
          return code;
        }
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) return undefined;
      await sleep(250);
    }
    return undefined;
  }
}
