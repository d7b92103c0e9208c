// composeWebhook(event, meta) destinations (docs/plugins.md, "Destinations"): the plugin returns
// `{ url, method?, headers?, body? }` (or null: nothing to send) and Spate sends it, through the
// plugins' egress policy (PLUGIN_EGRESS_ALLOW), on keep-alive connections shared by the worker
// (undici, PLUGIN_WEBHOOK_CONNECTIONS per origin, PLUGIN_WEBHOOK_PIPELINING requests in flight on
// each), at most PLUGIN_WEBHOOK_IN_FLIGHT requests of one config at a time. A 2xx answer
// delivers the event; 408, 429, 5xx and network failures are tried again (retries.ts); any other
// answer, a URL the egress policy refuses and a result that is not a webhook give the event up at
// once. A webhook is composed once per event: tries again resend it as it is.
import { Agent } from 'undici';
import type { EgressPolicy } from '../../coordination/index.js';
import type { PluginInstance } from '../instance.js';
import type { SandboxEvent } from '../sandbox/index.js';
import type { HeldMetrics } from '../held-metrics.js';
import { sandboxFailures } from './on-event.js';
import type { Failure } from './retries.js';
import type { SandboxCalls } from './sandbox-calls.js';

export interface Webhook {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
}

export interface WebhookSettings {
  /** Connections per destination origin (shared by the worker's configs). */
  connections: number;
  /** Requests in flight on one connection (HTTP/1.1 pipelining; 1: none). */
  pipelining: number;
  /** Requests of one config in flight at once. */
  inFlight: number;
  /** Longest wait for an answer's headers, then between its body's chunks, ms. */
  timeoutMs: number;
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

/**
 * At most `limit` requests of a config at once. A counter and a queue of waiters, cheaper per
 * request than p-limit's promise per task (it is on every webhook's path).
 */
export class RequestSlots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.used >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.used++;
    try {
      return await fn();
    } finally {
      // A slot passes straight to the next waiter (the count stays).
      const next = this.waiting.shift();
      if (next) next();
      else this.used--;
    }
  }
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

type SendResult = { status: number; statusText: string } | { error: Error };

/** The worker's connections to webhook destinations. */
export class WebhookSender {
  private readonly agent: Agent;
  /** Times each answered request (set by the holders, which own the metrics). */
  seconds: { observe(value: number): void } | undefined;
  private readonly addresses = new Map<string, Error | null>();

  constructor(
    private readonly egress: EgressPolicy,
    private readonly settings: WebhookSettings,
  ) {
    this.agent = new Agent({
      connections: settings.connections,
      pipelining: settings.pipelining,
      headersTimeout: settings.timeoutMs,
      bodyTimeout: settings.timeoutMs,
      connect: { lookup: egress.lookup, timeout: settings.timeoutMs },
    });
  }

  /** The concurrency bound of one config's requests. */
  slots(): RequestSlots {
    return new RequestSlots(this.settings.inFlight);
  }

  /** Sends one webhook; resolves with its answer's status or the error (never rejects). */
  send(w: Webhook): Promise<SendResult> {
    const refused = this.refusal(w.url.hostname);
    if (refused) return Promise.resolve({ error: refused });
    const began = performance.now();
    const seconds = this.seconds;
    return new Promise<SendResult>((resolve) => {
      let status = 0;
      let statusText = '';
      this.agent.dispatch(
        {
          origin: w.url.origin,
          path: `${w.url.pathname}${w.url.search}`,
          method: w.method,
          headers: w.headers,
          body: w.body,
          // Delivery is at least once: a request cut with its connection may be sent again, so
          // requests may share a connection (pipelining) whatever their method.
          idempotent: true,
        },
        // The handler API undici's Client still calls (7.x wraps the newer one only for its
        // interceptors); dispatch with it costs ~20 µs of CPU a request, request() ~30.
        {
          onConnect() {
            // Nothing to set up.
          },
          onHeaders(statusCode, _headers, _resume, message) {
            status = statusCode;
            statusText = message;
            return true;
          },
          onData() {
            // The answer's body is not read.
            return true;
          },
          onComplete() {
            seconds?.observe((performance.now() - began) / 1000);
            resolve({ status, statusText });
          },
          onError(error) {
            resolve({ error });
          },
        },
      );
    });
  }

  /**
   * Why the egress policy refuses an address written in a URL (names are checked on each
   * connection, by the lookup). Remembered per host: the answer for an address never changes.
   */
  private refusal(hostname: string): Error | undefined {
    let known = this.addresses.get(hostname);
    if (known === undefined) {
      known = null;
      const host = hostname.replace(/^\[|\]$/g, '');
      try {
        if (/^[0-9.]+$|:/.test(host)) this.egress.check(hostname, host);
      } catch (err) {
        known = err as Error;
      }
      if (this.addresses.size >= 10_000) this.addresses.clear();
      this.addresses.set(hostname, known);
    }
    return known ?? undefined;
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}

/** One attempt at a batch's webhooks: composes those not composed yet, sends the rest. */
export function webhookAttempt(
  instance: PluginInstance,
  calls: SandboxCalls,
  sender: WebhookSender,
  slots: RequestSlots,
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
    const sends = indexes.filter((i) => composed.has(i)).map(async (i) => {
      const webhook = composed.get(i)!;
      // Stopping: requests not sent yet stay unsent (the batch is delivered again by the next holder).
      const result = await slots.run(() => (signal.aborted ? Promise.resolve({ error: new Error('the destination was stopped') }) : sender.send(webhook)));
      const failure = sendFailure(webhook, result);
      if (failure) failures.set(i, failure);
      else delivered++;
    });
    await Promise.all(sends);
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
