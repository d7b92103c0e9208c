// One plugin config on one worker (docs/plugins.md, "Lifecycle"): its sandbox, set up once
// (setupPlugin, retried with back-off, then the config is disabled with a SYSTEM log), asked to run
// any exported method on a batch or on its own, torn down (teardownPlugin) when the config, the
// plugin or its code changes, or the worker stops. Its breaker disables the config when it keeps
// failing. What every role that runs plugins builds on (transformations here; destinations,
// scheduled tasks and jobs through the same instance).
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import {
  exponentialBackoff,
  decryptConfigSecrets,
  isEncryptedSecret,
  secretContext,
  type Logger,
  type NatsConnection,
  type PluginConfigsRecord,
  type SecretKeyring,
} from '../../lib/index.js';
import { errorText, type EgressPolicy } from '../coordination/index.js';
import { PluginBreaker, type BreakerSettings } from './breaker.js';
import { pluginFetch, storageOrCacheOp } from './host-ops.js';
import type { PluginLogs, PluginLogSource, PluginLogTarget, PluginLogType } from './logs.js';
import type { PluginMetrics } from './metrics.js';
import { Sandbox, SandboxError, type BatchMode, type BatchOutcome, type SandboxBatch, type SandboxLimits } from './sandbox/index.js';

export type PluginConfigEntry = PluginConfigsRecord['configs'][number];

/** What every instance of a worker shares. */
export interface InstanceContext {
  nc: NatsConnection;
  logs: PluginLogs;
  db: pg.Pool;
  egress: EgressPolicy;
  keyring: SecretKeyring;
  limits: SandboxLimits;
  setup: { attempts: number; backoffMs: number };
  breaker: BreakerSettings;
  logger: Logger;
  metrics: PluginMetrics;
  /** The compiled code under `hash` (spate-plugin-sources); waits a while for it to arrive. */
  code(hash: string): Promise<string | undefined>;
}

export type InstanceState = 'starting' | 'ready' | 'retrying' | 'failed' | 'stopped';

/** A config's identity for reloading: any change of it (config, plugin, code) means a new instance. */
export function instanceVersion(entry: PluginConfigEntry): string {
  return `${entry.updated_at}|${entry.plugin.updated_at}|${entry.plugin.source_hash ?? ''}`;
}

export class PluginInstance {
  /** PostHog's instance ID: names this sandbox in the config's logs. */
  readonly id = randomUUID();
  readonly configId: number;
  readonly pluginId: number;
  readonly version: string;
  /** How events name it in $plugins_succeeded / $plugins_failed: "<plugin name> (<config id>)". */
  readonly label: string;
  private stateValue: InstanceState = 'starting';
  private sandbox: Sandbox | undefined;
  /** The whole setup (attempts and back-off); `attemptDone` settles after each attempt. */
  private attempt: Promise<void>;
  private attemptDone: Promise<void> = Promise.resolve();
  private endAttempt: () => void = () => undefined;
  private readonly stopping = new AbortController();
  private readonly breaker: PluginBreaker;
  private readonly target: PluginLogTarget;
  private inFlight = 0;
  /** Who waits for no call to be in flight: a replaced engine's disposal, release, stop (several at once). */
  private idle: (() => void)[] = [];
  private stopped: Promise<void> | undefined;

  constructor(
    readonly teamId: number,
    readonly entry: PluginConfigEntry,
    private readonly ctx: InstanceContext,
  ) {
    this.configId = entry.id;
    this.pluginId = entry.plugin_id;
    this.version = instanceVersion(entry);
    this.label = `${entry.plugin.name} (${entry.id})`;
    this.breaker = new PluginBreaker(ctx.breaker);
    let secrets: string[] = [];
    try {
      secrets = this.decrypted().secrets;
    } catch {
      // Reported by the setup, which needs the config too.
    }
    this.target = { teamId, configId: entry.id, instanceId: this.id, secrets };
    this.attempt = this.setUp();
  }

  get state(): InstanceState {
    return this.stateValue;
  }

  /** The methods its code exports (known once it is loaded). */
  has(method: string): boolean {
    return this.sandbox?.methods.has(method) ?? false;
  }

  /** Waits for the setup attempt in progress; true when the instance is ready to run. */
  async ready(): Promise<boolean> {
    if (this.stateValue === 'starting') await this.attemptDone;
    return this.stateValue === 'ready';
  }

  /** A line in the config's logs (source, type; secrets masked, long messages cut, rate-limited). */
  log(source: PluginLogSource, type: PluginLogType, message: string, disable?: string): void {
    this.ctx.logs.write(this.target, source, type, message, disable);
  }

  /**
   * Runs `method` on the batch in the sandbox; undefined when the instance is not ready (being
   * set up again, failed, stopped). Counts the outcomes in the breaker: `failures` are what the
   * caller judged failed besides errors and timeouts (e.g. a result it refused).
   */
  async runBatch(method: string, mode: BatchMode, batch: SandboxBatch): Promise<BatchOutcome[] | undefined> {
    const sandbox = this.sandbox;
    if (this.stateValue !== 'ready' || !sandbox) return undefined;
    this.inFlight++;
    try {
      const outcomes = await sandbox.runBatch(method, mode, batch);
      if (sandbox.broken) this.restart('its engine failed (it ran out of memory or stack)');
      return outcomes;
    } catch (err) {
      if (err instanceof SandboxError && (err.code === 'out_of_memory' || err.code === 'broken')) {
        this.restart(`its engine failed (${err.message})`);
        return undefined;
      }
      throw err;
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) this.idled();
    }
  }

  /**
   * Calls one method (setupPlugin aside: runEvery*, `job:<name>`, getSettings) with the limits;
   * throws SandboxError. Undefined when the instance is not ready.
   */
  async call(method: string, args: unknown[] = []): Promise<{ value: unknown } | undefined> {
    const sandbox = this.sandbox;
    if (this.stateValue !== 'ready' || !sandbox) return undefined;
    this.inFlight++;
    try {
      return { value: await sandbox.call(method, args) };
    } catch (err) {
      if (err instanceof SandboxError && (err.code === 'out_of_memory' || err.code === 'broken')) this.restart(`its engine failed (${err.message})`);
      throw err;
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) this.idled();
    }
  }

  /**
   * Records how events came out (for the breaker); when it opens, the config is disabled (SYSTEM
   * log asking the admin server to) and the instance stops running.
   */
  record(ok: number, failed: number, timedOut: number): void {
    const opened = this.breaker.record(ok, failed, timedOut);
    if (opened && this.stateValue === 'ready') {
      this.stateValue = 'failed';
      this.ctx.metrics.disabled.inc({ reason: 'breaker' });
      const reason = `Disabled by the circuit breaker: ${opened}.`;
      this.log('SYSTEM', 'ERROR', `${reason} Events go on without this plugin until it is enabled again.`, reason);
      void this.release();
    }
  }

  /** Tears the instance down: teardownPlugin (within the limits), then frees the sandbox. Idempotent. */
  stop(): Promise<void> {
    return (this.stopped ??= (async () => {
      const wasReady = this.stateValue === 'ready';
      this.stateValue = 'stopped';
      this.stopping.abort();
      await this.attempt;
      await this.whenIdle();
      const sandbox = this.sandbox;
      if (wasReady && sandbox?.methods.has('teardownPlugin')) {
        await sandbox.call('teardownPlugin').catch((err: unknown) => this.log('SYSTEM', 'ERROR', `teardownPlugin failed (instance ID ${this.id}): ${errorText(err)}`));
      }
      sandbox?.dispose();
      this.sandbox = undefined;
    })());
  }

  // --- internals ----------------------------------------------------------------------------------

  private decrypted(): { config: Record<string, unknown>; secrets: string[] } {
    const secrets: string[] = [];
    const raw = this.entry.config;
    const config = decryptConfigSecrets(raw, this.ctx.keyring, (field) => secretContext('plugin_config', this.teamId, field));
    for (const [k, v] of Object.entries(raw)) {
      if (!isEncryptedSecret(v)) continue;
      const plain = config[k];
      secrets.push(typeof plain === 'string' ? plain : JSON.stringify(plain));
    }
    return { config, secrets };
  }

  private whenIdle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private idled(): void {
    for (const resolve of this.idle.splice(0)) resolve();
  }

  private async release(): Promise<void> {
    await this.whenIdle();
    this.sandbox?.dispose();
    this.sandbox = undefined;
  }

  /** An engine that ran out of memory or broke is replaced: loaded and set up again. */
  private restart(why: string): void {
    if (this.stateValue !== 'ready') return;
    this.stateValue = 'starting';
    this.log('SYSTEM', 'WARN', `The plugin's instance is started again (setupPlugin runs again): ${why}.`);
    const old = this.sandbox;
    this.sandbox = undefined;
    void this.whenIdle().then(() => old?.dispose());
    this.attempt = this.setUp();
  }

  private async loadOnce(): Promise<Sandbox> {
    const hash = this.entry.plugin.source_hash;
    if (!hash) throw new Error('the plugin has no code (index.ts or index.js)');
    const code = await this.ctx.code(hash);
    if (code === undefined) throw new Error(`its code ${hash.slice(0, 12)}… is not in the spate-plugin-sources bucket`);
    let config: Record<string, unknown>;
    try {
      config = this.decrypted().config;
    } catch (err) {
      throw new Error(`a secret field of this config does not decrypt: ${errorText(err)}`);
    }
    const sandbox = await Sandbox.create({
      code,
      file: 'index.js',
      config,
      limits: this.ctx.limits,
      host: {
        log: (level, message) => this.log('CONSOLE', level, message),
        call: (op, args) => (op === 'fetch' ? pluginFetch(this.ctx.egress, args as never, this.ctx.limits.wallMs) : storageOrCacheOp(this.ctx.db, this.configId, op, args)),
      },
    });
    return sandbox;
  }

  private async setUp(): Promise<void> {
    const { attempts, backoffMs } = this.ctx.setup;
    for (let attempt = 1; ; attempt++) {
      if (this.stopping.signal.aborted) return;
      this.attemptDone = new Promise((resolve) => (this.endAttempt = resolve));
      try {
        await this.tryOnce(attempt, attempts, backoffMs);
      } finally {
        this.endAttempt();
      }
      if (this.stateValue !== 'retrying') return;
      const wait = exponentialBackoff(backoffMs, attempt - 1, Infinity);
      // Waiters of that attempt went on (their events without the plugin); the next one is ours.
      await sleep(wait, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      if (this.stateValue === 'retrying') this.stateValue = 'starting';
    }
  }

  /** One attempt: ready, retrying (after a failure) or failed (the last attempt). */
  private async tryOnce(attempt: number, attempts: number, backoffMs: number): Promise<void> {
    {
      let sandbox: Sandbox | undefined;
      try {
        sandbox = await this.loadOnce();
        if (this.stopping.signal.aborted) {
          sandbox.dispose();
          return;
        }
        this.log('SYSTEM', 'INFO', `Plugin loaded (instance ID ${this.id}).`);
        if (sandbox.methods.has('setupPlugin')) {
          await sandbox.call('setupPlugin');
          this.log('SYSTEM', 'INFO', `setupPlugin completed successfully (instance ID ${this.id}).`);
        }
        this.sandbox = sandbox;
        if (this.stateValue === 'starting' || this.stateValue === 'retrying') this.stateValue = 'ready';
        this.ctx.metrics.setups.inc({ outcome: 'ready' });
        return;
      } catch (err) {
        sandbox?.dispose();
        const message = err instanceof SandboxError || err instanceof Error ? err.message : String(err);
        this.ctx.metrics.setups.inc({ outcome: 'failed' });
        if (this.stopping.signal.aborted) return;
        if (attempt >= attempts) {
          this.stateValue = 'failed';
          this.ctx.metrics.disabled.inc({ reason: 'setup' });
          const reason = `setupPlugin failed ${attempt} time${attempt === 1 ? '' : 's'}: ${message}`;
          this.log('SYSTEM', 'ERROR', `setupPlugin failed (instance ID ${this.id}): ${message}. Disabling the plugin after ${attempt} attempts.`, reason);
          return;
        }
        const wait = exponentialBackoff(backoffMs, attempt - 1, Infinity);
        this.log('SYSTEM', 'ERROR', `setupPlugin failed (instance ID ${this.id}): ${message}. Retrying in ${wait / 1000} s.`);
        this.stateValue = 'retrying';
      }
    }
  }
}
