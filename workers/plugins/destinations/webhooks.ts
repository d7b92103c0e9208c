// composeWebhook(event, meta) destinations (docs/plugins.md, "Destinations"): the plugin returns
// `{ url, method?, headers?, body? }` (or null: nothing to send) and Spate sends it from the
// worker's webhook thread (webhook-client.ts: egress policy, connections, PLUGIN_WEBHOOK_IN_FLIGHT
// per config). A 2xx answer
// delivers the event; 408, 429, 5xx and network failures are tried again (retries.ts); any other
// answer, a URL the egress policy refuses and a result that is not a webhook give the event up at
// once. A webhook is composed once per event: tries again resend it as it is.
import { Piscina } from 'piscina';
import { runtimeModule } from '../../../lib/index.js';
import type { PluginInstance } from '../instance.js';
import type { SandboxEvent } from '../sandbox/index.js';
import type { HeldMetrics } from '../held-metrics.js';
import { sandboxFailures } from './on-event.js';
import type { Failure } from './retries.js';
import type { SandboxCalls } from './sandbox-calls.js';
import { STOPPED, WaitingBudget, type SendResult, type WebhookRequest, type WebhookSettings } from './webhook-client.js';
import type { WebhookTask, WebhookThreadData } from './webhook-thread.js';

export type { WebhookSettings } from './webhook-client.js';

export interface Webhook {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** PostHog's default when a webhook names no headers. */
const DEFAULT_HEADERS = { 'Content-Type': 'application/json' };

/** Parsed URLs by text: a destination sends most of its webhooks to a few (a URL is ~2 µs to parse). */
const urls = new Map<string, URL>();
function parseUrl(text: string): URL {
  let url = urls.get(text);
  if (!url) {
    url = new URL(text);
    if (urls.size >= 1_000) urls.clear();
    urls.set(text, url);
  }
  return url;
}

/** The webhook composeWebhook returned, or why it is not one. */
export function toWebhook(value: unknown): Webhook | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'returned something that is not a webhook ({ url, method?, headers?, body? }) or null';
  const v = value as Record<string, unknown>;
  if (typeof v.url !== 'string') return 'returned a webhook without a url';
  let url: URL;
  try {
    url = parseUrl(v.url);
  } catch {
    return `returned a webhook whose url ${JSON.stringify(v.url.slice(0, 200))} is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `returned a webhook whose url is not http or https (${url.protocol})`;
  const method = v.method === undefined || v.method === null ? 'POST' : v.method;
  if (typeof method !== 'string' || !/^[A-Za-z]{1,20}$/.test(method)) return `returned a webhook whose method ${JSON.stringify(method)} is not an HTTP method`;
  let headers: Record<string, string> = DEFAULT_HEADERS;
  if (v.headers !== undefined && v.headers !== null) {
    if (typeof v.headers !== 'object' || Array.isArray(v.headers)) return 'returned a webhook whose headers are not an object';
    headers = {};
    for (const [k, h] of Object.entries(v.headers as Record<string, unknown>)) {
      if (typeof h !== 'string' && typeof h !== 'number') return `returned a webhook whose header ${JSON.stringify(k)} is not a string`;
      headers[k] = String(h);
    }
  }
  const body = v.body === undefined || v.body === null ? undefined : typeof v.body === 'string' ? v.body : JSON.stringify(v.body);
  return { url, method: method.toUpperCase(), headers, body };
}

/** `POST https://host/path` (no query: it may hold a key). */
function describeRequest(w: Webhook): string {
  return `${w.method} ${w.url.origin}${w.url.pathname}`;
}

function retryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * Body characters in the webhook thread at once, every config's: its heap holds them (a body of
 * 500 KB times a batch of 500 would fill it), so a batch waits for room rather than crash the
 * thread and fail every config's requests with it.
 */
const THREAD_BODY_CHARS = 32 * 1024 * 1024;
/** Body characters in one task: a batch of large webhooks goes to the thread in pieces. */
const TASK_BODY_CHARS = 4 * 1024 * 1024;

/** Consecutive pieces of `requests` of at most TASK_BODY_CHARS body characters (at least one request each). */
function piecesOf(requests: readonly WebhookRequest[]): Array<{ requests: WebhookRequest[]; chars: number }> {
  const pieces: Array<{ requests: WebhookRequest[]; chars: number }> = [];
  let piece: { requests: WebhookRequest[]; chars: number } | undefined;
  for (const r of requests) {
    const chars = r.body?.length ?? 0;
    if (!piece || (piece.requests.length > 0 && piece.chars + chars > TASK_BODY_CHARS)) pieces.push((piece = { requests: [], chars: 0 }));
    piece.requests.push(r);
    piece.chars += chars;
  }
  return pieces;
}

/**
 * The worker's webhook sending, in a thread of its own (webhook-thread.ts, webhook-client.ts):
 * sending a request costs the worker about as much CPU as composing it in the sandbox (undici, a
 * socket write per request), so the event loop composes the next batch while the thread sends.
 * Started with the first webhook, stopped with the plugins role.
 */
export class WebhookSender {
  /** Times each answered request (set by the holders, which own the metrics). */
  seconds: { observe(value: number): void } | undefined;
  private pool: Piscina<WebhookTask, SendResult[]> | undefined;
  private readonly budget = new WaitingBudget(THREAD_BODY_CHARS);
  private closed = false;

  constructor(
    private readonly egressAllow: string,
    private readonly settings: WebhookSettings,
  ) {}

  /** Sends one config's webhooks; a result for each, in order (never rejects). */
  async sendAll(configId: number, webhooks: readonly Webhook[], signal: AbortSignal): Promise<SendResult[]> {
    if (webhooks.length === 0) return [];
    if (this.closed || signal.aborted) return webhooks.map(() => STOPPED);
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const onAbort = () => Atomics.store(stop, 0, 1);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const requests = webhooks.map((w) => ({ origin: w.url.origin, hostname: w.url.hostname, path: `${w.url.pathname}${w.url.search}`, method: w.method, headers: w.headers, body: w.body }));
      const results = await Promise.all(
        piecesOf(requests).map((piece) => this.budget.run(() => this.run({ configId, requests: piece.requests, stop }), piece.chars)),
      );
      const all = results.flat();
      const seconds = this.seconds;
      if (seconds) for (const r of all) if ('ms' in r) seconds.observe(r.ms / 1000);
      return all;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  private async run(task: WebhookTask): Promise<SendResult[]> {
    try {
      if (this.closed) return task.requests.map(() => STOPPED);
      return await this.threads().run(task);
    } catch (err) {
      // The thread failed (its memory limit, a crash) or could not start: nothing is known of
      // these requests, so they are tried again like any network failure (piscina starts a new
      // thread).
      const error = { name: 'Error', message: `the webhook thread failed: ${err instanceof Error ? err.message : String(err)}` };
      return task.requests.map(() => ({ error }));
    }
  }

  private threads(): Piscina<WebhookTask, SendResult[]> {
    if (!this.pool) {
      const entry = runtimeModule(import.meta.url, './webhook-thread');
      const workerData: WebhookThreadData = { egressAllow: this.egressAllow, settings: this.settings };
      const pool = new Piscina<WebhookTask, SendResult[]>({
        filename: entry.path,
        execArgv: entry.execArgv,
        workerData,
        minThreads: 1,
        maxThreads: 1,
        idleTimeout: Number.POSITIVE_INFINITY,
        // Tasks wait on the network, not the CPU: every config's batches are in flight at once
        // (PLUGIN_WEBHOOK_IN_FLIGHT bounds each config's requests inside the thread, and
        // THREAD_BODY_CHARS what they hold).
        concurrentTasksPerWorker: 10_000,
        // The thread keeps sockets open between tasks: it must keep running (read a server's
        // FIN, run undici's timers), not sleep in Atomics.wait as piscina's default has it.
        atomics: 'disabled',
        resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 16 },
      });
      // A thread that fails with no task running is replaced by piscina; nothing of ours was in it.
      pool.on('error', () => undefined);
      this.pool = pool;
    }
    return this.pool;
  }

  async close(): Promise<void> {
    this.closed = true;
    const pool = this.pool;
    this.pool = undefined;
    await pool?.destroy();
  }
}

/** One attempt at a batch's webhooks: composes those not composed yet, sends the rest. */
export function webhookAttempt(
  instance: PluginInstance,
  calls: SandboxCalls,
  sender: WebhookSender,
  teamId: number,
  events: readonly SandboxEvent[],
  metrics: HeldMetrics,
  signal: AbortSignal,
): (indexes: readonly number[]) => Promise<Map<number, Failure>> {
  const composed = new Map<number, Webhook>();
  return async (indexes) => {
    const failures = new Map<number, Failure>();
    const toCompose = indexes.filter((i) => !composed.has(i));
    if (toCompose.length > 0) {
      const outcomes = await calls.run('composeWebhook', 'value', teamId, toCompose.map((i) => events[i]!), signal);
      const thrown = sandboxFailures(instance, outcomes, toCompose.length);
      for (const [at, failure] of thrown) failures.set(toCompose[at]!, failure);
      const byIndex = new Map(outcomes.map((o) => [o.index, o]));
      let skipped = 0;
      for (let at = 0; at < toCompose.length; at++) {
        const o = byIndex.get(at);
        if (o?.kind === 'null') {
          skipped++;
          continue;
        }
        if (o?.kind !== 'result') {
          // undefined: it returned undefined (nothing to send); errors and timeouts are above.
          if (o === undefined) skipped++;
          continue;
        }
        const webhook = toWebhook(o.value);
        if (typeof webhook === 'string') failures.set(toCompose[at]!, { reason: 'invalid', message: webhook, retry: false });
        else composed.set(toCompose[at]!, webhook);
      }
      if (skipped > 0) metrics.skipped.inc(skipped);
    }
    let delivered = 0;
    const toSend = indexes.filter((i) => composed.has(i));
    // Stopping: requests not sent yet stay unsent (the batch is delivered again by the next holder).
    const results = await sender.sendAll(instance.configId, toSend.map((i) => composed.get(i)!), signal);
    toSend.forEach((i, at) => {
      const failure = sendFailure(composed.get(i)!, results[at]!);
      if (failure) failures.set(i, failure);
      else delivered++;
    });
    metrics.delivered.inc({ method: 'composeWebhook' }, delivered);
    return failures;
  };
}

function sendFailure(w: Webhook, result: SendResult): Failure | undefined {
  if ('error' in result) {
    const refused = result.error.name === 'HostOpError';
    return { reason: refused ? 'refused' : 'network', message: `request ${describeRequest(w)} failed: ${result.error.message}`, retry: !refused };
  }
  if (result.status >= 200 && result.status < 300) return undefined;
  return {
    reason: 'status',
    message: `request ${describeRequest(w)} was answered ${result.status}${result.statusText ? ` ${result.statusText}` : ''}`,
    retry: retryableStatus(result.status),
  };
}
