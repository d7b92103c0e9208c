// The HTTP client that sends composeWebhook's requests, in the worker's webhook thread
// (webhook-thread.ts): keep-alive connections shared by every config (undici,
// PLUGIN_WEBHOOK_CONNECTIONS per origin, PLUGIN_WEBHOOK_PIPELINING requests in flight on each), the
// plugins' egress policy on every address, at most PLUGIN_WEBHOOK_IN_FLIGHT requests of one config
// at a time. It answers what became of each request; what that means for the event is the
// destination's to decide (webhooks.ts).
import { Agent } from 'undici';
import type { EgressPolicy } from '../../coordination/index.js';

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

/** One request as it crosses to the thread (a URL object does not). */
export interface WebhookRequest {
  origin: string;
  hostname: string;
  /** Path and query. */
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** The answer's status (and how long it took, ms), or why there was none. */
export type SendResult = { status: number; statusText: string; ms: number } | { error: { name: string; message: string } };

/**
 * At most `limit` units taken at once (requests, body characters), first come first served; one
 * take larger than the whole limit goes alone. A counter and a queue of waiters: a take that fits
 * makes no promise (it is on every webhook's path, cheaper than p-limit's promise per task).
 */
export class WaitingBudget {
  private used = 0;
  private readonly waiting: Array<{ units: number; go: () => void }> = [];

  constructor(private readonly limit: number) {}

  get idle(): boolean {
    return this.used === 0 && this.waiting.length === 0;
  }

  /** Undefined when taken at once; else a promise that resolves once taken. */
  take(units = 1): Promise<void> | undefined {
    if (this.waiting.length === 0 && this.fits(units)) {
      this.used += units;
      return undefined;
    }
    return new Promise<void>((go) => this.waiting.push({ units, go }));
  }

  give(units = 1): void {
    this.used -= units;
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.units)) {
      const next = this.waiting.shift()!;
      this.used += next.units;
      next.go();
    }
  }

  async run<T>(fn: () => Promise<T>, units = 1): Promise<T> {
    const wait = this.take(units);
    if (wait) await wait;
    try {
      return await fn();
    } finally {
      this.give(units);
    }
  }

  private fits(units: number): boolean {
    return this.used === 0 || this.used + units <= this.limit;
  }
}

/** A request not sent because its destination stopped (sent again by the next holder). */
export const STOPPED: SendResult = { error: { name: 'Error', message: 'the destination was stopped' } };

export class WebhookClient {
  private readonly agent: Agent;
  private readonly addresses = new Map<string, Error | null>();
  private readonly slots = new Map<number, WaitingBudget>();

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

  /**
   * Sends one config's requests, at most PLUGIN_WEBHOOK_IN_FLIGHT of them (with its other
   * batches') at a time; a request not started when `stopped()` says so is not sent.
   */
  async sendAll(configId: number, requests: readonly WebhookRequest[], stopped: () => boolean): Promise<SendResult[]> {
    let slots = this.slots.get(configId);
    if (!slots) this.slots.set(configId, (slots = new WaitingBudget(this.settings.inFlight)));
    try {
      return await Promise.all(requests.map((r) => slots.run(() => (stopped() ? Promise.resolve(STOPPED) : this.send(r)))));
    } finally {
      if (slots.idle) this.slots.delete(configId);
    }
  }

  /** Sends one request; resolves with its answer's status or the error (never rejects). */
  private send(r: WebhookRequest): Promise<SendResult> {
    const refused = this.refusal(r.hostname);
    if (refused) return Promise.resolve({ error: { name: refused.name, message: refused.message } });
    const began = performance.now();
    return new Promise<SendResult>((resolve) => {
      let status = 0;
      let statusText = '';
      this.agent.dispatch(
        {
          origin: r.origin,
          path: r.path,
          method: r.method,
          headers: r.headers,
          body: r.body,
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
            resolve({ status, statusText, ms: performance.now() - began });
          },
          onError(error) {
            resolve({ error: { name: error.name, message: error.message } });
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
