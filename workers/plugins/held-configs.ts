// The plugin configs a worker holds (docs/plugins.md, "Destinations, scheduled tasks and jobs"):
// every enabled config with code is a lease of the set `plugin` (`plugin.<config id>` in
// spate-workers), held by one live worker at a time and moved like a shard when it stops. Its
// holder raises the config's fence in PostgreSQL, sets the instance up, and runs what the plugin
// exports: its destination (onEvent, composeWebhook) from PROCESSED, its scheduled tasks, its
// jobs. A change of the config, its plugin or its code starts them again on the new instance,
// from where they stood.
import { setTimeout as sleep } from 'node:timers/promises';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type pg from 'pg';
import { STREAMS, type Logger, type Registry } from '../../lib/index.js';
import { errorText, isTransientDbError, type Lease, type LeaseCoordinator } from '../coordination/index.js';
import type { PluginCatalog } from './catalog.js';
import { ProcessedFeed, startDelivery, WebhookSender, type Delivery, type DeliverySettings, type WebhookSettings } from './destinations/index.js';
import { createHeldMetrics, type DeliveryLag, type HeldMetrics } from './held-metrics.js';
import { HolderState } from './holder-state.js';
import { instanceVersion, type PluginConfigEntry, type PluginInstance } from './instance.js';
import { startJobs } from './jobs.js';
import { startScheduledTasks, type TaskClock } from './scheduled.js';

/** Lease set of the plugin configs' holders: `plugin.<config id>` in spate-workers. */
export const PLUGIN_LEASES = 'plugin';

export interface HeldConfigsSettings {
  delivery: DeliverySettings;
  webhooks: WebhookSettings;
  /** Bytes a destination's PROCESSED feed pulls at once. */
  pullBytes: number;
}

export interface HeldConfigsDeps {
  catalog: PluginCatalog;
  db: pg.Pool;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** PLUGIN_EGRESS_ALLOW: what the webhook thread's egress policy allows. */
  egressAllow: string;
  registry: Registry;
  logger: Logger;
  workerId: string;
  clock: TaskClock;
}

export interface HeldConfigs {
  /** Config ids whose lease this worker holds. */
  held(): number[];
  stop(): Promise<void>;
}

const RETRY_MS = 1_000;
const READY_POLL_MS = 250;

/**
 * Configs that get a holder: enabled, with code (a config without any, a frontend app's, has
 * nothing to run, and setting one up would fail and disable it).
 */
function heldNames(catalog: PluginCatalog): string[] {
  const names: string[] = [];
  for (const { entry } of catalog.configs()) if (entry.plugin.source_hash) names.push(String(entry.id));
  return names;
}

function findConfig(catalog: PluginCatalog, configId: number): { teamId: number; entry: PluginConfigEntry } | undefined {
  for (const c of catalog.configs()) if (c.entry.id === configId) return c;
  return undefined;
}

export function holdPluginConfigs(coordinator: LeaseCoordinator, settings: HeldConfigsSettings, deps: HeldConfigsDeps): HeldConfigs {
  const sender = new WebhookSender(deps.egressAllow, settings.webhooks);
  const runners = new Map<number, ConfigRunner>();
  const metrics = createHeldMetrics(
    deps.registry,
    () => runners.size,
    () => [...runners.values()].flatMap((r): DeliveryLag[] => { const lag = r.lag(); return lag ? [lag] : []; }),
  );
  sender.seconds = metrics.webhookSeconds;
  coordinator.addLeaseSet({
    set: PLUGIN_LEASES,
    names: () => heldNames(deps.catalog),
    start(lease, lost) {
      const configId = Number(lease.name);
      const runner = new ConfigRunner(configId, lease, lost, { ...deps, settings, sender, metrics });
      runners.set(configId, runner);
      return {
        stop: async () => {
          await runner.stop();
          if (runners.get(configId) === runner) runners.delete(configId);
        },
      };
    },
  });
  // A config enabled, disabled or changed is leased, released or started again at once.
  const unsubscribe = deps.catalog.subscribe(() => {
    coordinator.refresh();
    for (const r of runners.values()) r.configsChanged();
  });
  return {
    held: () => [...runners.keys()].sort((a, b) => a - b),
    async stop() {
      unsubscribe();
      await Promise.all([...runners.values()].map((r) => r.stop()));
      await sender.close();
    },
  };
}

interface RunnerDeps extends HeldConfigsDeps {
  settings: HeldConfigsSettings;
  sender: WebhookSender;
  metrics: HeldMetrics;
}

interface Part {
  stop(): Promise<void>;
}

/** What the holder of one config runs; started again on the new instance when the config changes. */
class ConfigRunner {
  private version: string | undefined;
  private parts: Part[] = [];
  private delivery: Delivery | undefined;
  private starting: AbortController | undefined;
  private syncing: Promise<void> = Promise.resolve();
  private stopped = false;
  private readonly logger: Logger;

  constructor(
    readonly configId: number,
    private readonly lease: Lease,
    private readonly lost: (reason: string) => void,
    private readonly deps: RunnerDeps,
  ) {
    this.logger = deps.logger.child({ configId });
    this.configsChanged();
  }

  lag(): DeliveryLag | undefined {
    const d = this.delivery;
    return d ? { configId: this.configId, ...d.lag() } : undefined;
  }

  configsChanged(): void {
    const found = findConfig(this.deps.catalog, this.configId);
    const version = found ? instanceVersion(found.entry) : undefined;
    if (version === this.version) return;
    // A start still waiting for the old instance gives up at once.
    this.starting?.abort();
    this.syncing = this.syncing.then(() => this.sync()).catch((err: unknown) => this.logger.error({ err: errorText(err) }, 'plugin config holder failed'));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.starting?.abort();
    await this.syncing;
    await this.stopParts();
  }

  private mayAct = () => Date.now() < this.lease.deadline;

  private async sync(): Promise<void> {
    if (this.stopped) return;
    const found = findConfig(this.deps.catalog, this.configId);
    const version = found ? instanceVersion(found.entry) : undefined;
    if (version === this.version) return;
    await this.stopParts();
    this.version = version;
    // Gone or disabled: the lease is released at the next round.
    if (!found) return;
    const starting = new AbortController();
    this.starting = starting;
    try {
      await this.startParts(found.teamId, found.entry, starting.signal);
    } catch (err) {
      if (starting.signal.aborted || this.stopped) return;
      throw err;
    }
  }

  private async startParts(teamId: number, entry: PluginConfigEntry, signal: AbortSignal): Promise<void> {
    const { deps } = this;
    const state = new HolderState(deps.db, this.configId, teamId, deps.workerId);
    const start = await this.retrying('taking the config over', signal, async () => {
      const { created } = await deps.jsm.streams.info(STREAMS.processed);
      return state.takeOver(created);
    });
    const instance = deps.catalog.acquire(teamId, entry);
    const lost = (reason: string) => this.lost(reason);
    const common = { instance, state, metrics: deps.metrics, logger: this.logger, mayAct: this.mayAct, lost };
    this.parts.push(startJobs({ ...common, js: deps.js }));
    // What else it runs depends on what its code exports: known once it is set up.
    if (!(await this.untilReady(instance, signal))) return;
    const tasks = startScheduledTasks({ ...common, clock: deps.clock });
    this.parts.push(tasks);
    if (instance.has('onEvent') || instance.has('composeWebhook')) {
      const delivered = start.delivered;
      const feed = new ProcessedFeed(
        deps.js,
        deps.jsm,
        teamId,
        delivered ? { afterSeq: delivered.seq } : { sinceMs: Date.parse(entry.updated_at) },
        deps.settings.pullBytes,
        this.logger,
      );
      const delivery = startDelivery({
        ...common,
        feed,
        skipLines: delivered && delivered.lines > 0 ? { seq: delivered.seq + 1, lines: delivered.lines } : undefined,
        sender: deps.sender,
        settings: deps.settings.delivery,
      });
      this.delivery = delivery;
      this.parts.push(delivery);
    }
  }

  /** Waits for the instance's setup; false when it failed or the wait was given up. */
  private async untilReady(instance: PluginInstance, signal: AbortSignal): Promise<boolean> {
    while (!signal.aborted) {
      if (await instance.ready()) return true;
      // Failed for good: the config is being disabled; a fixed config comes back as a new version.
      if (instance.state === 'failed' || instance.state === 'stopped') return false;
      await sleep(READY_POLL_MS, undefined, { signal }).catch(() => undefined);
    }
    return false;
  }

  private async retrying<T>(what: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      signal.throwIfAborted();
      try {
        return await fn();
      } catch (err) {
        if (signal.aborted) throw err;
        if (attempt % 10 === 1) this.logger.warn({ err: errorText(err), transient: isTransientDbError(err) }, `${what} failed: trying again`);
        await sleep(RETRY_MS, undefined, { signal });
      }
    }
  }

  private async stopParts(): Promise<void> {
    const parts = this.parts.splice(0);
    this.delivery = undefined;
    await Promise.all(parts.map((p) => p.stop().catch((err: unknown) => this.logger.warn({ err: errorText(err) }, 'stopping a plugin config part failed'))));
  }
}
