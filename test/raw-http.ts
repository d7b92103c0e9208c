// Raw HTTP/1.1 over node:net, for what fetch cannot do: pipelining, bodies split across writes,
// requests that declare more than they send.
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A POST written as one string (its Content-Length from the body). */
export function rawPost(path: string, body: string | Buffer, headers: Record<string, string> = {}): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const head = Object.entries({ Host: 'x', 'Content-Length': String(bytes.length), ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return Buffer.concat([Buffer.from(`POST ${path} HTTP/1.1\r\n${head}\r\n`), bytes]);
}

export function rawGet(path: string): Buffer {
  return Buffer.from(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
}

/** Reads answers (Content-Length framed) from a byte stream as they complete. */
export function parseAnswers(bytes: Buffer): { answers: RawAnswer[]; rest: Buffer } {
  const answers: RawAnswer[] = [];
  let at = 0;
  for (;;) {
    const end = bytes.indexOf('\r\n\r\n', at);
    if (end === -1) break;
    const lines = bytes.subarray(at, end).toString('latin1').split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    if (status === 100) {
      at = end + 4;
      continue;
    }
    const length = Number(headers['content-length'] ?? 0);
    if (bytes.length < end + 4 + length) break;
    answers.push({ status, headers, body: bytes.subarray(end + 4, end + 4 + length).toString('utf8') });
    at = end + 4 + length;
  }
  return { answers, rest: bytes.subarray(at) };
}

export interface RawConnection {
  socket: Socket;
  write(bytes: Buffer | string): void;
  /** Resolves once `count` answers arrived in all (rejects when the connection closes first). */
  answers(count: number, timeoutMs?: number): Promise<RawAnswer[]>;
  closed: Promise<void>;
  close(): void;
}

/** `localAddress`: another loopback address (127.0.0.2, …) is another client address. */
export async function rawConnection(url: string, localAddress?: string): Promise<RawConnection> {
  const socket = connect({ port: Number(new URL(url).port), host: new URL(url).hostname, localAddress });
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let received: Buffer = Buffer.alloc(0);
  const parsed: RawAnswer[] = [];
  let wake: () => void = () => undefined;
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    const { answers, rest } = parseAnswers(received);
    parsed.push(...answers);
    received = rest;
    wake();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  void closed.then(() => wake());
  return {
    socket,
    write: (bytes) => socket.write(bytes),
    async answers(count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (parsed.length < count) {
        if (socket.destroyed) throw new Error(`connection closed after ${parsed.length} of ${count} answers`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`${parsed.length} of ${count} answers within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return parsed.slice(0, count);
    },
    closed,
    close: () => socket.destroy(),
  };
}
