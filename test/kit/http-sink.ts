// An HTTP server for tests that receive requests (destinations, webhooks): node:http on a free
// loopback port, every request recorded with its method, path, headers and body; what it answers
// is up to the test (a status, after a delay if it likes).
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SinkRequest {
  method: string;
  /** Path and query. */
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** When the request's body had arrived (ms). */
  at: number;
}

export interface HttpSink extends AsyncDisposable {
  /** `http://127.0.0.1:<port>` */
  url: string;
  requests: SinkRequest[];
  stop(): Promise<void>;
}

/** `answer` gives each request's status (200 by default); a promise delays the answer. */
export async function startHttpSink(answer: (request: SinkRequest) => number | Promise<number> = () => 200): Promise<HttpSink> {
  const requests: SinkRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request: SinkRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
      requests.push(request);
      void Promise.resolve(answer(request)).then(
        (status) => res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : `answer ${status}`),
        () => res.destroy(),
      );
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const stop = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, stop, [Symbol.asyncDispose]: stop };
}
