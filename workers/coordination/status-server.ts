// /metrics (Prometheus), /_health (the process answers) and /_ready (joined the cluster and able
// to process) on a small node:http server.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiError, type Registry } from '../../lib/index.js';
import { toWorkerErrorResponse, type WorkerErrorCode } from './status-errors.js';

export interface StatusServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startStatusServer(
  host: string,
  port: number,
  registry: Registry,
  readiness: () => { ready: boolean; detail: Record<string, unknown> },
): Promise<StatusServer> {
  const server: Server = createServer((req, res) => {
    const send = (status: number, contentType: string, body: string) => {
      res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const fail = (code: WorkerErrorCode, detail?: string) => {
      const { status, body } = toWorkerErrorResponse(new ApiError(code, detail));
      send(status, 'application/json', JSON.stringify(body));
    };
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail('method_not_allowed');
    if (path === '/_health') return send(200, 'application/json', '{"status":"ok"}');
    if (path === '/_ready') {
      const { ready, detail } = readiness();
      if (!ready) return fail('not_ready', `not ready: ${JSON.stringify(detail)}`);
      return send(200, 'application/json', JSON.stringify({ status: 'ready', ...detail }));
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => send(200, registry.contentType, text),
        (err: unknown) => send(500, 'text/plain', `metrics failed: ${String(err)}`),
      );
      return;
    }
    fail('not_found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
