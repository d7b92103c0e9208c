// Plugin log lines → stream PLUGIN_LOGS (subject plugin_logs.<teamId>.<configId>), which the admin
// server stores and serves at …/plugin_configs/:id/logs/ (docs/plugins.md, "Logs"). Every line has
// an id (so a republished one is stored once), a source (CONSOLE for console.*, PLUGIN for a
// plugin's errors, SYSTEM for the runtime's messages) and a type. Messages longer than
// MAX_MESSAGE_CHARS are cut (and say so); the values of a config's secret fields are masked; a
// config writing more than its rate has the surplus dropped and counted in one WARN line. SYSTEM
// lines are never dropped. Lines are sent every FLUSH_MS, one message per config.
import { randomUUID } from 'node:crypto';
import type { JetStreamClient } from '@nats-io/jetstream';
import { pipelineSubject, toNdjson, type Logger, type PluginLogLine } from '../../lib/index.js';
import { errorText } from '../coordination/index.js';

export type PluginLogSource = 'SYSTEM' | 'PLUGIN' | 'CONSOLE';
export type PluginLogType = 'DEBUG' | 'LOG' | 'INFO' | 'WARN' | 'ERROR';

export const MAX_MESSAGE_CHARS = 10_000;
const FLUSH_MS = 250;
/** Lines kept per config while NATS does not take them: beyond, the oldest non-SYSTEM go. */
const MAX_QUEUED = 5_000;
/** Bytes of one published message (well under any NATS max_payload). */
const MESSAGE_BYTES = 256 * 1024;

export interface PluginLogTarget {
  readonly teamId: number;
  readonly configId: number;
  /** The instance (one sandbox, one worker): PostHog's instance_id. */
  readonly instanceId: string;
  /** Values to mask in every message: the config's decrypted secret fields. */
  readonly secrets: readonly string[];
}

interface Bucket {
  tokens: number;
  at: number;
  dropped: number;
  lines: PluginLogLine[];
  target: PluginLogTarget;
}

export function truncateMessage(message: string): string {
  if (message.length <= MAX_MESSAGE_CHARS) return message;
  return `${message.slice(0, MAX_MESSAGE_CHARS)}… (cut: ${message.length} characters)`;
}

/**
 * Masks each secret as it is and as it reads inside JSON (console.log of an object: quotes,
 * backslashes and control characters escaped). Before any cut: a secret across the cut would
 * otherwise leave its start in the message.
 */
export function maskSecrets(message: string, secrets: readonly string[]): string {
  let out = message;
  for (const s of secrets) {
    if (s.length < 4) continue;
    for (const form of new Set([s, JSON.stringify(s).slice(1, -1)])) if (out.includes(form)) out = out.split(form).join('***');
  }
  return out;
}

/**
 * A message's id names exactly the lines it holds: its first, its last and how many. A group is
 * made again on each flush, so a retry of a publish that was stored (answered too late) may hold
 * more lines than the first try: under the first line's id alone JetStream dropped it as a copy, and
 * the lines that joined were lost. Lines join only at the end and leave only by being dropped, so
 * these three name one content; a line sent in two messages is stored once (its own id).
 */
function messageId(lines: readonly PluginLogLine[]): string {
  return `log:${lines[0]!.id!}:${lines.length}:${lines[lines.length - 1]!.id!}`;
}

export class PluginLogs {
  private readonly buckets = new Map<string, Bucket>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private readonly ratePerSecond: number;
  private readonly burst: number;

  constructor(
    private readonly js: JetStreamClient,
    options: { ratePerSecond: number },
    private readonly logger: Logger,
  ) {
    this.ratePerSecond = options.ratePerSecond;
    this.burst = options.ratePerSecond * 10;
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  /**
   * Queues a line for the config. CONSOLE and PLUGIN lines over the config's rate are dropped
   * (counted); SYSTEM lines always go. `disable` asks the admin server to disable the config.
   */
  write(target: PluginLogTarget, source: PluginLogSource, type: PluginLogType, message: string, disable?: string): void {
    const key = `${target.teamId}.${target.configId}`;
    let bucket = this.buckets.get(key);
    const now = Date.now();
    if (!bucket) this.buckets.set(key, (bucket = { tokens: this.burst, at: now, dropped: 0, lines: [], target }));
    bucket.target = target;
    if (source !== 'SYSTEM') {
      bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.ratePerSecond);
      bucket.at = now;
      if (bucket.tokens < 1) {
        bucket.dropped++;
        return;
      }
      bucket.tokens--;
    }
    const line: PluginLogLine = {
      id: randomUUID(),
      timestamp: new Date(now).toISOString(),
      source,
      type,
      message: truncateMessage(maskSecrets(message, target.secrets)),
      instance_id: target.instanceId,
    };
    if (disable !== undefined) line.disable_plugin_config = truncateMessage(maskSecrets(disable, target.secrets));
    bucket.lines.push(line);
    if (bucket.lines.length > MAX_QUEUED) {
      const at = bucket.lines.findIndex((l) => l.source !== 'SYSTEM');
      if (at !== -1) {
        bucket.lines.splice(at, 1);
        bucket.dropped++;
      }
    }
  }

  /** Publishes what is queued; lines NATS did not take stay queued for the next flush. */
  flush(): Promise<void> {
    return (this.flushing ??= this.flushNow().finally(() => (this.flushing = undefined)));
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
    // Lines queued while that flush ran.
    await this.flush();
  }

  private async flushNow(): Promise<void> {
    for (const bucket of this.buckets.values()) {
      if (bucket.dropped > 0) {
        const dropped = bucket.dropped;
        bucket.dropped = 0;
        this.write(bucket.target, 'SYSTEM', 'WARN', `${dropped} log line${dropped === 1 ? ' was' : 's were'} dropped: this plugin wrote more than ${this.ratePerSecond} lines per second (PLUGIN_LOG_RATE)`);
      }
      while (bucket.lines.length > 0) {
        let bytes = 0;
        let count = 0;
        while (count < bucket.lines.length && (count === 0 || bytes < MESSAGE_BYTES)) bytes += JSON.stringify(bucket.lines[count++]).length;
        const lines = bucket.lines.slice(0, count);
        try {
          await this.js.publish(pipelineSubject('pluginLogs', bucket.target.teamId, bucket.target.configId), toNdjson(lines), { msgID: messageId(lines) });
        } catch (err) {
          this.logger.warn({ err: errorText(err), configId: bucket.target.configId }, 'plugin log lines not published yet (will retry)');
          break;
        }
        bucket.lines.splice(0, count);
      }
      if (bucket.lines.length === 0 && bucket.dropped === 0 && bucket.tokens >= this.burst) this.buckets.delete(`${bucket.target.teamId}.${bucket.target.configId}`);
    }
  }
}
