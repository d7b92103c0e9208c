// The capture endpoints: CORS, method and size checks, body reading, then parse → route →
// publish → answer. The answer is 200 only after JetStream acknowledged every accepted event.
import type { Logger } from '../../lib/index.js';
import type { IngestConfig } from '../config.js';
import { CaptureError, captureErrorResponse } from '../errors.js';
import { boundLabels, type IngestMetrics } from '../metrics.js';
import type { DropReason, RequestMeta, RouteKind } from '../parse/index.js';
import type { ParsePool } from '../pool/index.js';
import { routeSegments, type EventPublisher, type ProjectLimiter, type SpikeLimiter } from '../publish/index.js';
import { Reservation, type SharedBudget } from '../inflight-budget.js';
import type { Exchange } from './exchange.js';
import { readBody } from './read-body.js';

/** Capture paths, each served with and without the trailing slash. */
export const CAPTURE_ROUTES: ReadonlyMap<string, RouteKind> = new Map([
  ['/capture', 'capture'],
  ['/batch', 'batch'],
  ['/e', 'e'],
  ['/i/v0/e', 'i'],
  ['/track', 'track'],
  ['/engage', 'engage'],
]);

const OK_BODY = JSON.stringify({ status: 1 });

export interface HotMetrics {
  duration: (route: string) => { observe(seconds: number): void };
}

export function hotMetrics(metrics: IngestMetrics): HotMetrics {
  return { duration: boundLabels(metrics.requestDuration) };
}

export interface CaptureDeps {
  config: IngestConfig;
  /** From messageSizeLimit (message-size.ts). */
  maxMessageBytes: number;
  pool: ParsePool;
  publisher: EventPublisher;
  limiter: SpikeLimiter;
  /** Each project's rate limits and daily quota (from its spate-projects record). */
  projectLimiter: ProjectLimiter;
  budget: SharedBudget;
  metrics: IngestMetrics;
  /** Metric children bound to their labels once (see boundLabels). */
  hot: HotMetrics;
  log: Logger;
  /** False until NATS is connected and the project registry is loaded, and again while stopping. */
  accepting(): boolean;
  /** Counts requests between arrival and answer, so shutdown can wait for them. */
  inflight: { count: number; onIdle?: () => void };
  /** Bodies being received, per client address (MAX_UPLOADS_PER_CLIENT). */
  uploads: Map<string, number>;
}

function clientIp(exchange: Exchange, trustProxy: boolean): string | undefined {
  if (trustProxy) {
    const forwarded = exchange.header('x-forwarded-for');
    if (forwarded) return forwarded.split(',')[0]!.trim();
  }
  return exchange.remoteAddress;
}

function contentLengthOf(exchange: Exchange): number | undefined {
  const header = exchange.header('content-length');
  if (!header) return undefined;
  const n = Number(header);
  return Number.isInteger(n) && n >= 0 ? n : undefined;
}

export function handleCapture(deps: CaptureDeps, route: RouteKind, exchange: Exchange): void {
  const method = exchange.method;
  const origin = exchange.header('origin');
  const { metrics, config } = deps;
  const count = (status: number) => metrics.requests.of(route, status).inc();

  if (method === 'options') {
    const requested = exchange.header('access-control-request-headers');
    exchange.answer({
      status: 200,
      body: OK_BODY,
      headers: {
        'Access-Control-Allow-Methods': 'GET, POST, OPTIONS',
        ...(requested ? { 'Access-Control-Allow-Headers': requested } : {}),
        'Access-Control-Max-Age': '86400',
      },
    }, origin);
    return count(200);
  }
  const fail = (err: unknown) => {
    const answer = captureErrorResponse(err);
    // Every 503 says when to come back, also those raised deep in parsing (budget refusals).
    if (answer.status === 503 && !answer.headers['Retry-After']) answer.headers = { ...answer.headers, 'Retry-After': String(config.retryAfterSeconds) };
    if (answer.status >= 500 && !(err instanceof CaptureError)) deps.log.error({ err, route }, 'capture request failed');
    exchange.answer({ status: answer.status, body: JSON.stringify(answer.body), headers: answer.headers }, origin);
    count(answer.status);
  };
  if (method !== 'post' && method !== 'get') return fail(new CaptureError('method_not_allowed', `Method "${method.toUpperCase()}" not allowed.`));
  if (!deps.accepting()) {
    return fail(new CaptureError('unavailable', 'ingest node is not ready, please retry', { headers: { 'Retry-After': String(config.retryAfterSeconds) } }));
  }

  const contentLength = method === 'get' ? 0 : contentLengthOf(exchange);
  if (contentLength !== undefined && contentLength > config.maxBodyBytes) {
    return fail(new CaptureError('payload_too_large', `request body of ${contentLength} bytes exceeds the limit of ${config.maxBodyBytes}`));
  }
  const meta: RequestMeta = {
    route,
    query: exchange.query,
    contentType: exchange.header('content-type'),
    contentEncoding: exchange.header('content-encoding'),
    ip: clientIp(exchange, config.trustProxy),
    nowMs: 0, // set when the body is complete
  };

  // A body still to come holds an upload slot of its client address until it is complete.
  const uploader = exchange.requestComplete ? undefined : (meta.ip ?? '');
  if (uploader !== undefined) {
    const uploads = deps.uploads.get(uploader) ?? 0;
    if (uploads >= config.maxUploadsPerClient) {
      return fail(new CaptureError('too_many_uploads', `${uploads} request bodies from this address are still arriving (MAX_UPLOADS_PER_CLIENT)`, { headers: { 'Retry-After': String(config.retryAfterSeconds) } }));
    }
    deps.uploads.set(uploader, uploads + 1);
  }
  let uploading = uploader !== undefined;
  const uploadDone = () => {
    if (!uploading) return;
    uploading = false;
    const left = deps.uploads.get(uploader!)! - 1;
    if (left === 0) deps.uploads.delete(uploader!);
    else deps.uploads.set(uploader!, left);
  };

  deps.inflight.count++;
  const reservation = new Reservation(deps.budget);
  let finished = false;
  let bodyComplete = false;
  const finishRequest = () => {
    if (finished) return;
    finished = true;
    uploadDone();
    reservation.release();
    if (--deps.inflight.count === 0) deps.inflight.onIdle?.();
  };
  exchange.onAborted(() => {
    // A client gone (or timed out) mid-body never completes it: give its bytes back now. Once
    // the body is complete, the request finishes its parse/publish and releases them itself.
    if (!bodyComplete) finishRequest();
  });
  if (method === 'get') {
    void processBody(deps, meta, new Uint8Array(0), reservation, exchange, origin, count, fail).finally(finishRequest);
    return;
  }
  readBody(exchange, contentLength, { maxBytes: config.maxBodyBytes }, (bytes) => reservation.grow(bytes), (outcome) => {
    bodyComplete = true;
    uploadDone();
    if (outcome.kind === 'complete') {
      metrics.bytesIn.inc(outcome.body.length);
      void processBody(deps, meta, outcome.body, reservation, exchange, origin, count, fail).finally(finishRequest);
      return;
    }
    if (outcome.kind === 'too_large') {
      fail(new CaptureError('payload_too_large', `request body exceeds the limit of ${config.maxBodyBytes} bytes`));
    } else {
      fail(new CaptureError('overloaded', undefined, { headers: { 'Retry-After': String(config.retryAfterSeconds) } }));
    }
    finishRequest();
  });
}

async function processBody(
  deps: CaptureDeps,
  meta: RequestMeta,
  body: Uint8Array,
  reservation: Reservation,
  exchange: Exchange,
  origin: string,
  count: (status: number) => void,
  fail: (err: unknown) => void,
): Promise<void> {
  const started = performance.now();
  try {
    meta.nowMs = Date.now();
    const parsing = deps.pool.parse(body, meta, reservation);
    const parsed = parsing instanceof Promise ? await parsing : parsing;
    if (!reservation.resize(parsed.data.length)) {
      throw new CaptureError('overloaded', 'ingest node is at capacity (decoded payload), please retry', {
        headers: { 'Retry-After': String(deps.config.retryAfterSeconds) },
      });
    }
    for (const reason in parsed.dropped) deps.metrics.eventsDropped.inc({ reason }, parsed.dropped[reason as DropReason]);
    const decision = deps.projectLimiter.decide(
      { token: parsed.token, projectId: parsed.projectId, historical: parsed.historical, events: parsed.accepted, messages: parsed.segments.length },
      Date.now(),
    );
    if (decision.kind === 'rate_limited') {
      deps.metrics.projectLimited.inc({ project: String(parsed.projectId), limit: decision.limit }, parsed.accepted);
      const what = decision.limit === 'events_per_second' ? 'events' : 'historical messages';
      throw new CaptureError('rate_limited', `rate limit exceeded: this project may send ${decision.perSecond} ${what} per second to this ingest node`, {
        headers: { 'Retry-After': String(decision.retryAfterSeconds) },
      });
    }
    if (decision.kind === 'quota_exhausted') {
      // PostHog's answer to a used-up billing quota: the events are dropped and the request
      // still succeeds, so SDKs do not hold and resend them all day (docs/capture-api.md).
      deps.metrics.projectLimited.inc({ project: String(parsed.projectId), limit: 'events_per_day' }, parsed.accepted);
      deps.metrics.eventsDropped.inc({ reason: 'quota_exceeded' }, parsed.accepted);
    } else if (parsed.accepted > 0) {
      const items = routeSegments(parsed, deps);
      await deps.publisher.publish(items);
      for (const item of items) deps.metrics.eventsAccepted.of(item.stream).inc(item.count);
    }
    const beacon = meta.query.includes('beacon=1') && new URLSearchParams(meta.query).get('beacon') === '1';
    exchange.answer(beacon ? { status: 204 } : { status: 200, body: OK_BODY }, origin);
    count(beacon ? 204 : 200);
  } catch (err) {
    fail(err);
  } finally {
    deps.hot.duration(meta.route).observe((performance.now() - started) / 1000);
  }
}
