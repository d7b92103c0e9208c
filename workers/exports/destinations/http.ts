// HTTP (docs/exports.md, "HTTP"): PostHog's batch capture format, `POST url` with
// `{"api_key": token, "historical_migration": true, "batch": [...]}`, at most BATCH_RECORDS
// events or BATCH_BYTES per request, gzip when the records are many. 5xx, 429, 408 and network
// errors are retried with exponential back-off (RETRIES times); any other 4xx fails the run at
// once with the answer's text. At-least-once: a rerun sends the interval again, so a receiver
// that deduplicates by uuid (PostHog, Spate) stores each event once.
import http from 'node:http';
import https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import type { EgressPolicy } from '../egress.js';
import { ExportError } from '../errors.js';
import { pythonIsoUs, type ExportRecord } from '../records.js';
import type { Delivered, Destination, DestinationWriter } from './destination.js';
import { exponentialBackoff } from '../../../lib/index.js';

export const BATCH_RECORDS = 5_000;
export const BATCH_BYTES = 50 * 1024 * 1024;
/** Bodies larger than this are sent gzipped (Content-Encoding: gzip). */
export const GZIP_ABOVE_BYTES = 64 * 1024;
export const RETRIES = 5;

export interface HttpConfig {
  url: string;
  token: string;
}

interface Answer {
  status: number;
  text: string;
}

export class HttpDestination implements Destination {
  readonly type = 'HTTP' as const;
  private readonly url: URL;
  private readonly agent: http.Agent;

  constructor(
    private readonly config: HttpConfig,
    private readonly egress: EgressPolicy,
    private readonly retryBaseMs = 1_000,
  ) {
    try {
      this.url = new URL(config.url);
    } catch {
      throw new ExportError('invalid_config', `HTTP: url ${JSON.stringify(config.url)} is not a URL`);
    }
    if (this.url.protocol !== 'http:' && this.url.protocol !== 'https:') throw new ExportError('invalid_config', `HTTP: url must be http or https, not ${this.url.protocol}`);
    const Agent = this.url.protocol === 'https:' ? https.Agent : http.Agent;
    this.agent = new Agent({ keepAlive: true, lookup: egress.lookup });
  }

  /** One request, no retries: the answer, or an ExportError for a network failure. */
  request(body: Buffer, gzip: boolean, signal: AbortSignal): Promise<Answer> {
    const send = this.url.protocol === 'https:' ? https.request : http.request;
    return new Promise((resolve, reject) => {
      const req = send(
        this.url,
        {
          method: 'POST',
          agent: this.agent,
          signal,
          timeout: 60_000,
          headers: { 'Content-Type': 'application/json', 'Content-Length': body.length, ...(gzip ? { 'Content-Encoding': 'gzip' } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            if (size < 4096) chunks.push(c);
            size += c.length;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8').slice(0, 1000) }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error('no answer within 60 s')));
      req.on('error', (err: NodeJS.ErrnoException) =>
        reject(err instanceof ExportError ? err : new ExportError('unavailable', `HTTP ${this.url.host}: ${err.code ? `${err.code} ` : ''}${err.message}`, { cause: err })),
      );
      req.end(body);
    });
  }

  /** Sends one body, retrying what may pass later; throws for what will not. */
  async post(body: Buffer, gzip: boolean, signal: AbortSignal): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      let failure: ExportError;
      try {
        const answer = await this.request(body, gzip, signal);
        if (answer.status >= 200 && answer.status < 300) return;
        const message = `HTTP ${this.url.host} answered ${answer.status}${answer.text ? `: ${answer.text}` : ''}`;
        const retryable = answer.status >= 500 || answer.status === 429 || answer.status === 408;
        failure = new ExportError(retryable ? 'unavailable' : answer.status === 401 || answer.status === 403 ? 'access_denied' : answer.status === 404 ? 'not_found' : 'rejected', message);
      } catch (err) {
        if (signal.aborted) throw err;
        failure = err instanceof ExportError ? err : new ExportError('unavailable', String(err), { cause: err });
      }
      if (!failure.retryable || attempt >= RETRIES) throw failure;
      await sleep(exponentialBackoff(this.retryBaseMs, attempt, Infinity), undefined, { signal });
    }
  }

  async check(): Promise<void> {
    // The host must resolve to an address the policy allows; requests test the rest.
    if (!/^\[?[0-9a-f:.]+\]?$/i.test(this.url.hostname)) await this.egress.resolve(this.url.hostname);
    else this.egress.check(this.url.hostname, this.url.hostname.replace(/^\[|\]$/g, ''));
  }

  open(_run: unknown, signal: AbortSignal): Promise<DestinationWriter> {
    return Promise.resolve(new HttpWriter(this, this.config.token, signal));
  }

  close(): Promise<void> {
    this.agent.destroy();
    return Promise.resolve();
  }
}

/** PostHog's capture format of an exported event. */
export function captureEvent(r: ExportRecord): Record<string, unknown> {
  const properties: Record<string, unknown> = { ...r.properties, $geoip_disable: true };
  if (r.event === '$autocapture' && r.elements_chain) properties.$elements_chain = r.elements_chain;
  return { uuid: r.uuid, distinct_id: r.distinct_id, timestamp: pythonIsoUs(r.timestampUs), event: r.event, properties };
}

class HttpWriter implements DestinationWriter {
  private batch: string[] = [];
  private batchBytes = 0;
  private records = 0;
  private bytes = 0;
  private requests = 0;

  constructor(private readonly destination: HttpDestination, private readonly token: string, private readonly signal: AbortSignal) {}

  async writeEvents(records: readonly ExportRecord[]): Promise<void> {
    for (const r of records) {
      const json = JSON.stringify(captureEvent(r));
      if (this.batch.length >= BATCH_RECORDS || this.batchBytes + json.length > BATCH_BYTES) await this.flush();
      this.batch.push(json);
      this.batchBytes += json.length + 1;
    }
  }

  writePersons(): Promise<void> {
    return Promise.reject(new ExportError('invalid_config', 'HTTP batch exports only support the events model'));
  }

  private async flush(): Promise<void> {
    if (this.batch.length === 0) return;
    const text = `{"api_key":${JSON.stringify(this.token)},"historical_migration":true,"batch":[${this.batch.join(',')}]}`;
    const raw = Buffer.from(text);
    const gzip = raw.length > GZIP_ABOVE_BYTES;
    const body = gzip ? gzipSync(raw, { level: 4 }) : raw;
    await this.destination.post(body, gzip, this.signal);
    this.records += this.batch.length;
    this.bytes += body.length;
    this.requests++;
    this.batch = [];
    this.batchBytes = 0;
  }

  async commit(): Promise<Delivered> {
    await this.flush();
    return { records: this.records, bytes: this.bytes, detail: `${this.requests} requests` };
  }

  abort(): Promise<void> {
    this.batch = [];
    return Promise.resolve();
  }
}
