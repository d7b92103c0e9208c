// The event loop's HTTP server: capture routes, health and readiness, metrics, 404 otherwise.
import { CaptureError, captureErrorResponse } from '../errors.js';
import { CAPTURE_ROUTES, handleCapture, type CaptureDeps } from './capture-route.js';
import { respond, type ResponseState } from './respond.js';
import { uws, type us_listen_socket } from './uws.js';

export interface ServerDeps {
  capture: CaptureDeps;
  /** What `/_ready` reports: 200 when ready, 503 otherwise, with the checks behind it. */
  readiness(): { ready: boolean; checks: Record<string, boolean> };
  /** Refreshes gauges read at scrape time. */
  beforeScrape(): void;
}

export interface HttpServer {
  port: number;
  /** Stops accepting connections; those open finish what they have. */
  close(): void;
}

export async function listenHttp(host: string, port: number, deps: ServerDeps): Promise<HttpServer> {
  const { metrics } = deps.capture;
  const app = uws.App();
  app.any('/*', (res, req) => {
    const url = req.getUrl();
    const path = url.length > 1 && url.endsWith('/') ? url.slice(0, -1) : url;
    const route = CAPTURE_ROUTES.get(path);
    if (route) return handleCapture(deps.capture, route, res, req);
    const state: ResponseState = { aborted: false, origin: '' };
    const method = req.getMethod();
    switch (path) {
      case '/_health':
        return respond(res, state, { status: 200, body: '{"status":"ok"}' });
      case '/_ready': {
        const { ready, checks } = deps.readiness();
        return respond(res, state, { status: ready ? 200 : 503, body: JSON.stringify({ ready, checks }) });
      }
      case '/metrics':
        if (method !== 'get') break;
        res.onAborted(() => (state.aborted = true));
        deps.beforeScrape();
        void metrics.registry.metrics().then((text) => respond(res, state, { status: 200, body: text, contentType: metrics.registry.contentType }));
        return;
    }
    const answer = captureErrorResponse(new CaptureError('not_found'));
    respond(res, state, { status: answer.status, body: JSON.stringify(answer.body) });
  });

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(host, port, (socket) => (socket ? resolve(socket) : reject(new Error(`cannot listen on ${host}:${port}`))));
  });
  return { port: uws.us_socket_local_port(listenSocket), close: () => uws.us_listen_socket_close(listenSocket) };
}
