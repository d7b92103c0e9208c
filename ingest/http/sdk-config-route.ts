// The SDKs' configuration calls on the capture URL: `/flags/`, `/decide/`, `/array/<key>/config`
// and `/array/<key>/config.js` (ingest/sdk-config has the answers). Cheap by design: no parse
// thread, no JetStream, and nothing counted against a project's event limits or quota. The
// bodies are small and read on the event loop, bounded by FLAGS_MAX_BODY_BYTES.
import type { ProjectRecord } from '../../lib/index.js';
import { CaptureError, captureErrorResponse } from '../errors.js';
import { configPathOf, flagsAnswer, planFlagsAnswer, readFlagsRequest, remoteConfig, remoteConfigScript, type FlagsEndpoint, type SiteAppsSource } from '../sdk-config/index.js';
import type { CaptureDeps } from './capture-route.js';
import type { Exchange } from './exchange.js';
import { readBody } from './read-body.js';

export interface SdkConfigDeps {
  /** The project of a key, as the node's registry knows it. */
  lookup(token: string): ProjectRecord | undefined;
  siteApps: SiteAppsSource;
  /** FLAGS_MAX_BODY_BYTES: the largest flags body, on the wire and decoded. */
  maxBodyBytes: number;
}

/** Flag endpoints, each served with and without the trailing slash. */
const FLAG_ROUTES: ReadonlyMap<string, FlagsEndpoint> = new Map([
  ['/flags', 'flags'],
  ['/decide', 'decide'],
]);

/** Handles the request when its path is a configuration call; false when it is not one. */
export function handleSdkConfig(capture: CaptureDeps, deps: SdkConfigDeps, path: string, exchange: Exchange): boolean {
  const endpoint = FLAG_ROUTES.get(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);
  if (endpoint) {
    serve(capture, endpoint, exchange, (answer, fail) => flags(capture, deps, endpoint, exchange, answer, fail));
    return true;
  }
  const config = configPathOf(path);
  if (!config) return false;
  serve(capture, 'config', exchange, (answer) => {
    if (exchange.method !== 'get') throw new CaptureError('method_not_allowed', `Method "${exchange.method.toUpperCase()}" not allowed.`);
    if (!config.valid) throw new CaptureError('invalid_token');
    const project = deps.lookup(config.token);
    // PostHog's answer for a key no project has (a 404 from Django: no such config).
    if (!project) throw new CaptureError('not_found', 'Not found.');
    const body = remoteConfig(config.token, deps.siteApps(project.projectId));
    if (config.form === 'json') answer(200, JSON.stringify(body));
    else answer(200, remoteConfigScript(body), 'application/javascript');
  });
  return true;
}

type Answer = (status: number, body: string, contentType?: string) => void;

/** CORS, preflight, readiness and errors as capture has them; `handle` gives the answer. */
function serve(capture: CaptureDeps, route: string, exchange: Exchange, handle: (answer: Answer, fail: (err: unknown) => void) => void): void {
  const origin = exchange.header('origin');
  const count = (status: number) => capture.metrics.requests.of(route, status).inc();
  const answer: Answer = (status, body, contentType) => {
    exchange.answer({ status, body, contentType, headers: { 'Cache-Control': 'no-store' } }, origin);
    count(status);
  };
  const fail = (err: unknown) => {
    const mapped = captureErrorResponse(err);
    if (mapped.status >= 500 && !(err instanceof CaptureError)) capture.log.error({ err, route }, 'configuration call failed');
    exchange.answer({ status: mapped.status, body: JSON.stringify(mapped.body), headers: mapped.headers }, origin);
    count(mapped.status);
  };
  if (exchange.method === 'options') {
    const requested = exchange.header('access-control-request-headers');
    exchange.answer(
      {
        status: 200,
        body: '{"status":1}',
        headers: { 'Access-Control-Allow-Methods': 'GET, POST, OPTIONS', ...(requested ? { 'Access-Control-Allow-Headers': requested } : {}), 'Access-Control-Max-Age': '86400' },
      },
      origin,
    );
    return count(200);
  }
  try {
    if (exchange.method !== 'get' && exchange.method !== 'post') throw new CaptureError('method_not_allowed', `Method "${exchange.method.toUpperCase()}" not allowed.`);
    // The project keys are not loaded yet: a key cannot be told known from unknown.
    if (!capture.accepting()) throw new CaptureError('unavailable', 'ingest node is not ready, please retry', { headers: { 'Retry-After': String(capture.config.retryAfterSeconds) } });
    handle(answer, fail);
  } catch (err) {
    fail(err);
  }
}

function flags(capture: CaptureDeps, deps: SdkConfigDeps, endpoint: FlagsEndpoint, exchange: Exchange, answer: Answer, fail: (err: unknown) => void): void {
  const method = exchange.method === 'get' ? 'get' : 'post';
  const plan = planFlagsAnswer({ endpoint, method, query: exchange.query });
  if (plan.minimal) return answer(200, JSON.stringify(flagsAnswer(plan, undefined, Date.now())));

  const lengthHeader = exchange.header('content-length');
  // No Content-Length: no body at all, or a chunked one (read up to the limit).
  const contentLength = lengthHeader !== '' ? Number(lengthHeader) : exchange.requestComplete ? 0 : undefined;
  if (contentLength !== undefined && contentLength > deps.maxBodyBytes) throw new CaptureError('payload_too_large', `a flags request body may hold at most ${deps.maxBodyBytes} bytes (FLAGS_MAX_BODY_BYTES)`);
  // Shutdown waits for it, as for a capture request. Its bytes are not taken from the node's
  // in-flight budget: that budget is also held, for a moment, by a parse thread's whole-limit
  // reservation while it gunzips a capture body, and a flags call refused with 503 for that
  // breaks the SDK's page load. A flags body is bounded like a request head instead: at most
  // FLAGS_MAX_BODY_BYTES, one at a time per connection (later requests on it wait unread).
  capture.inflight.count++;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    if (--capture.inflight.count === 0) capture.inflight.onIdle?.();
  };
  exchange.onAborted(finish);
  readBody(exchange, contentLength, { maxBytes: deps.maxBodyBytes }, () => true, (outcome) => {
    try {
      // (never over_budget: nothing is reserved)
      if (outcome.kind !== 'complete') throw new CaptureError('payload_too_large', `a flags request body may hold at most ${deps.maxBodyBytes} bytes (FLAGS_MAX_BODY_BYTES)`);
      const request = readFlagsRequest({
        body: outcome.body,
        query: exchange.query,
        contentType: exchange.header('content-type'),
        contentEncoding: exchange.header('content-encoding'),
        maxDecodedBytes: deps.maxBodyBytes,
      });
      const project = deps.lookup(request.token);
      if (!project) throw new CaptureError('unknown_api_key');
      const config = remoteConfig(request.token, deps.siteApps(project.projectId));
      answer(200, JSON.stringify(flagsAnswer(plan, config, Date.now())));
    } catch (err) {
      fail(err);
    } finally {
      finish();
    }
  });
}
