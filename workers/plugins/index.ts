// The plugins role (docs/plugins.md): plugin configs followed from spate-plugin-configs, one
// sandboxed instance per config on this worker, transformations run through the event hooks
// before person processing, every plugin's logs to PLUGIN_LOGS.
//
// Destinations, scheduled tasks and jobs run on the worker holding each config's lease
// (held-configs.ts): `hold(coordinator)` adds the lease set, once the coordinator exists.
//
// For roles that run other methods, `catalog` is the entry: `catalog.configs()` lists every project's enabled configs,
// `catalog.subscribe()` tells of changes, `catalog.acquire(teamId, entry)` gives the config's
// instance on this worker (set up once, torn down on change), whose `ready()`, `has(method)`,
// `runBatch(method, mode, batch)`, `call(method, args)`, `log(...)` and `record(...)` (breaker)
// are what they call.
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { createPool, errorText, type EventHooks, type LeaseCoordinator } from '../coordination/index.js';
import type { Logger, NatsConnection, Registry, SecretKeyring } from '../../lib/index.js';
import type { BreakerSettings } from './breaker.js';
import { PluginCatalog } from './catalog.js';
import { holdPluginConfigs, type HeldConfigs, type HeldConfigsSettings } from './held-configs.js';
import { startJobRunsPruning } from './job-runs-pruning.js';
import { pluginEgressPolicy } from './host-ops.js';
import { PluginLogs } from './logs.js';
import { createPluginMetrics } from './metrics.js';
import type { SandboxLimits } from './sandbox/index.js';
import { REAL_TASK_CLOCK, type TaskClock } from './scheduled.js';
import { transformationHook } from './transformations.js';

export type { PluginCatalog } from './catalog.js';
export { PLUGIN_LEASES } from './held-configs.js';
export { periodStart, REAL_TASK_CLOCK, type TaskClock } from './scheduled.js';
export type { InstanceState, PluginConfigEntry, PluginInstance } from './instance.js';
export type { PluginLogSource, PluginLogType } from './logs.js';
export { Sandbox, SandboxError, type BatchMode, type BatchOutcome, type SandboxBatch, type SandboxEvent, type SandboxLimits } from './sandbox/index.js';

export interface PluginsOptions {
  databaseUrl: string;
  keyring: SecretKeyring;
  /** PLUGIN_EGRESS_ALLOW. */
  egressAllow: string;
  limits: SandboxLimits;
  setup: { attempts: number; backoffMs: number };
  breaker: BreakerSettings;
  logRatePerSecond: number;
  /** This worker's id: the owner its holders write. */
  workerId: string;
  /** Destinations and webhooks of the configs this worker holds. */
  held: Omit<HeldConfigsSettings, 'pullBytes'>;
}

export interface PluginsDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  registry: Registry;
  logger: Logger;
  hooks: EventHooks;
  /** NATS's max_payload: a transformed event must still fit a PROCESSED message. */
  maxPayload: () => number;
  jsm: JetStreamManager;
  /** The scheduled tasks' clock (tests shorten the periods); real UTC periods by default. */
  taskClock?: TaskClock;
}

export interface PluginsRole {
  readonly catalog: PluginCatalog;
  /** Runs the destinations, scheduled tasks and jobs of the configs whose lease this worker gets. */
  hold(coordinator: LeaseCoordinator): void;
  /** Config ids whose lease this worker holds. */
  heldConfigs(): number[];
  /** Tears every instance down (teardownPlugin), sends the last logs, closes the pool. */
  stop(): Promise<void>;
}

export async function startPlugins(options: PluginsOptions, deps: PluginsDeps): Promise<PluginsRole> {
  const logger = deps.logger.child({ role: 'plugins' });
  const db = createPool(options.databaseUrl, 4, logger);
  const logs = new PluginLogs(deps.js, { ratePerSecond: options.logRatePerSecond }, logger);
  let catalog: PluginCatalog | undefined;
  const metrics = createPluginMetrics(deps.registry, () => catalog?.counts() ?? new Map<string, number>());
  try {
    catalog = await PluginCatalog.open(
      deps.nc,
      {
        nc: deps.nc,
        logs,
        db,
        egress: pluginEgressPolicy(options.egressAllow),
        keyring: options.keyring,
        limits: options.limits,
        setup: options.setup,
        breaker: options.breaker,
        logger,
        metrics,
      },
      logger,
    );
  } catch (err) {
    await logs.stop();
    await db.end();
    throw err;
  }
  const opened = catalog;
  const removeHook = deps.hooks.add('plugins', transformationHook(opened, metrics, { maxChangeChars: () => deps.maxPayload() }, logger));
  const pruning = startJobRunsPruning(db, deps.jsm, logger);
  let held: HeldConfigs | undefined;
  return {
    catalog: opened,
    hold(coordinator) {
      if (held) throw new Error('the plugin configs are held already');
      held = holdPluginConfigs(
        coordinator,
        // A pull must fit the largest PROCESSED message, or it never arrives.
        { ...options.held, pullBytes: Math.max(2 * 1024 * 1024, deps.maxPayload() + 1024 * 1024) },
        {
          catalog: opened,
          db,
          js: deps.js,
          jsm: deps.jsm,
          egressAllow: options.egressAllow,
          registry: deps.registry,
          logger,
          workerId: options.workerId,
          clock: deps.taskClock ?? REAL_TASK_CLOCK,
        },
      );
    },
    heldConfigs: () => held?.held() ?? [],
    async stop() {
      removeHook();
      pruning.stop();
      // The coordinator stopped the holders' runners first (their leases released); this ends the rest.
      await held?.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'stopping the plugin config holders failed'));
      await opened.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'stopping plugin instances failed'));
      await logs.stop().catch((err: unknown) => logger.warn({ err: errorText(err) }, 'sending the last plugin logs failed'));
      await db.end().catch(() => undefined);
    },
  };
}
