// The event loop's HTTP server: capture routes, the SDKs' configuration calls, health and
// readiness, metrics, 404 otherwise.
// Connections are node:net sockets parsed by llhttp (connection.ts): uWS 20.30, which served
// before, closes any connection that sends a request while an earlier answer is pending (its
// HttpContext refuses "async pipelining" by design), so pipelined captures got no answer at all.
import { createServer, type Server, type Socket } from 'node:net';
import { CaptureError, captureErrorResponse } from '../errors.js';
import { CAPTURE_ROUTES, handleCapture, type CaptureDeps } from './capture-route.js';
import { Connection, type ConnectionOptions } from './connection.js';
import type { Exchange } from './exchange.js';
import { handleSdkConfig, type SdkConfigDeps } from './sdk-config-route.js';

export interface ServerDeps {
  capture: CaptureDeps;
  /** The SDKs' configuration calls (/flags/, /decide/, /array/<key>/config[.js]). */
  sdkConfig: SdkConfigDeps;
  /** What `/_ready` reports: 200 when ready, 503 otherwise, with the checks behind it. */
  readiness(): { ready: boolean; checks: Record<string, boolean> };
  /** Refreshes gauges read at scrape time. */
  beforeScrape(): void;
  connection: ConnectionOptions;
  /** Serve only /metrics, /_health and /_ready (INGEST_METRICS_PORT): no capture, no SDK calls. */
  operationsOnly?: boolean;
}

export interface HttpServer {
  port: number;
  /** Stops accepting connections; those open finish what they have. */
  close(): void;
  /** Closes every connection still open (after in-flight requests were answered). */
  closeConnections(): void;
}

/** Where to listen: a host and port, or a socket inherited from the launcher (fd ≥ 0). */
export interface ListenAt {
  host: string;
  port: number;
  fd: number;
}

export async function listenHttp(at: ListenAt, deps: ServerDeps): Promise<HttpServer> {
  const { metrics } = deps.capture;
  const route = (exchange: Exchange) => {
    const url = exchange.path;
    const path = url.length > 1 && url.endsWith('/') ? url.slice(0, -1) : url;
    if (!deps.operationsOnly) {
      const captureRoute = CAPTURE_ROUTES.get(path);
      if (captureRoute) return handleCapture(deps.capture, captureRoute, exchange);
      if (handleSdkConfig(deps.capture, deps.sdkConfig, path, exchange)) return;
    }
    switch (path) {
      case '/_health':
        return exchange.answer({ status: 200, body: '{"status":"ok"}' });
      case '/_ready': {
        const { ready, checks } = deps.readiness();
        return exchange.answer({ status: ready ? 200 : 503, body: JSON.stringify({ ready, checks }) });
      }
      case '/metrics':
        if (exchange.method !== 'get') break;
        deps.beforeScrape();
        void metrics.registry.metrics().then((text) => exchange.answer({ status: 200, body: text, contentType: metrics.registry.contentType }));
        return;
    }
    const answer = captureErrorResponse(new CaptureError('not_found'));
    exchange.answer({ status: answer.status, body: JSON.stringify(answer.body) });
  };

  const connections = new Set<Connection>();
  const sockets = new Set<Socket>();
  const server: Server = createServer({ noDelay: true }, (socket) => {
    const connection = new Connection(socket, route, deps.connection);
    connections.add(connection);
    sockets.add(socket);
    socket.once('close', () => {
      connections.delete(connection);
      sockets.delete(socket);
    });
  });
  const sweep = setInterval(() => {
    const now = Date.now();
    for (const c of connections) c.sweep(now);
  }, 1000);
  sweep.unref();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const listening = () => {
      server.off('error', reject);
      resolve();
    };
    // Several ingest processes accept from one inherited socket (Node 20 has no SO_REUSEPORT).
    if (at.fd >= 0) server.listen({ fd: at.fd }, listening);
    else server.listen(at.port, at.host, listening);
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : at.port,
    close: () => {
      clearInterval(sweep);
      server.close();
    },
    closeConnections: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}
