// One HTTP/1.1 connection: llhttp parses the bytes, each request becomes an Exchange, and
// answers are written in request order (RFC 9112 §9.3). Requests are handled one at a time:
// POST is not a safe method, so pipelined captures are processed in the order they were sent
// (per-distinct_id order holds), and while one is handled, reading stops once the next request
// has begun, so a client pipelining many requests holds at most one read of them in memory.
import type { Socket } from 'node:net';
import { CaptureError, captureErrorResponse } from '../errors.js';
import { Exchange, type ExchangeOwner } from './exchange.js';
import { HTTPParser, METHODS, type HeadersCompleteCallback, type LlhttpParser } from './llhttp.js';

export interface ConnectionOptions {
  maxHeaderBytes: number;
  /** A connection with no request in progress is closed after this long; so is one whose head takes longer. */
  idleTimeoutMs: number;
  /** How long a request's body may take to arrive, from its head; then 408 and its bytes are released. */
  bodyTimeoutMs: number;
}

export type RequestHandler = (exchange: Exchange) => void;

export class Connection implements ExchangeOwner {
  private readonly parser: LlhttpParser = new HTTPParser();
  /** Requests not yet answered on the wire, oldest first; the first has been handed to the handler. */
  private readonly queue: Exchange[] = [];
  /** The request llhttp is reading now (its head or body). */
  private current: Exchange | undefined;
  private partialHeaders: string[] = [];
  private partialUrl = '';
  private paused = false;
  private closed = false;
  private flushing = false;
  /** No request after this one is read (Connection: close, a parse error, an early answer). */
  private lastRequestSeen = false;
  readonly remoteAddress: string | undefined;
  /** When the head now being read (or the wait for one) must be done by (ms; 0: no deadline). */
  headDeadline = 0;

  constructor(
    private readonly socket: Socket,
    private readonly handler: RequestHandler,
    private readonly options: ConnectionOptions,
  ) {
    const address = socket.remoteAddress;
    this.remoteAddress = address?.startsWith('::ffff:') ? address.slice(7) : address;
    this.headDeadline = Date.now() + options.idleTimeoutMs;
    const parser = this.parser;
    parser.initialize(HTTPParser.REQUEST, {}, options.maxHeaderBytes, 0);
    parser[HTTPParser.kOnHeaders] = (headers: string[], url: string) => {
      this.partialHeaders.push(...headers);
      this.partialUrl += url;
    };
    parser[HTTPParser.kOnHeadersComplete] = ((_major, _minor, headers, method, url, _s, _m, upgrade, keepAlive) => {
      this.onHead(headers ?? this.takePartialHeaders(), METHODS[method] ?? 'unknown', url ?? this.takePartialUrl(), keepAlive && !upgrade);
    }) satisfies HeadersCompleteCallback;
    parser[HTTPParser.kOnBody] = (chunk: Buffer) => this.current?.deliver(chunk);
    parser[HTTPParser.kOnMessageComplete] = () => {
      const exchange = this.current;
      this.current = undefined;
      this.headDeadline = Date.now() + options.idleTimeoutMs;
      exchange?.complete();
    };
    socket.on('data', (data: Buffer) => this.read(data));
    socket.on('close', () => this.onClose());
    socket.on('error', () => socket.destroy());
  }

  /**
   * Called about once a second: closes a connection whose head (or idle wait) is overdue, and
   * answers 408 to a request whose body is (its handler lets go of what the body held).
   */
  sweep(nowMs: number): void {
    if (this.headDeadline !== 0 && nowMs > this.headDeadline && this.current === undefined && this.queue.length === 0) this.socket.destroy();
    const active = this.queue[0];
    if (active && !active.requestComplete && !active.finished && nowMs > active.bodyDeadline) {
      const { status, body } = captureErrorResponse(new CaptureError('body_timeout', `the request body did not arrive within ${this.options.bodyTimeoutMs} ms`));
      active.interrupt({ status, body: JSON.stringify(body) });
    }
  }

  answered(exchange: Exchange): void {
    if (exchange === this.queue[0]) this.flush();
  }

  pauseReading(): void {
    this.paused = true;
    this.socket.pause();
  }

  resumeReading(): void {
    this.paused = false;
    if (this.queue.length <= 1) this.socket.resume();
  }

  private read(data: Buffer): void {
    if (this.lastRequestSeen) return; // bytes after a request that closes the connection
    const result = this.parser.execute(data);
    if (typeof result !== 'number') this.onParseError(result);
  }

  private onHead(rawHeaders: string[], method: string, url: string, keepAlive: boolean): void {
    this.headDeadline = 0;
    const q = url.indexOf('?');
    const exchange = new Exchange(this, method, q === -1 ? url : url.slice(0, q), q === -1 ? '' : url.slice(q + 1), rawHeaders, keepAlive);
    this.current = exchange;
    this.queue.push(exchange);
    if (!keepAlive) this.lastRequestSeen = true;
    if (this.queue.length === 1) this.start(exchange);
    else this.socket.pause(); // handled after the ones before it: read no further meanwhile
  }

  private start(exchange: Exchange): void {
    exchange.bodyDeadline = Date.now() + this.options.bodyTimeoutMs;
    // A client waiting for "100 Continue" before sending its body (curl does past 1 MiB).
    if (!exchange.requestComplete && exchange.header('expect').toLowerCase() === '100-continue') this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    this.handler(exchange);
  }

  /** Writes every answer that is ready at the head of the queue, then hands over the next request. */
  private flush(): void {
    // A request handed over below may answer at once: the loop here writes it.
    if (this.closed || this.flushing) return;
    this.flushing = true;
    let corked = false;
    while (this.queue.length > 0 && this.queue[0]!.out !== undefined) {
      const exchange = this.queue.shift()!;
      // Answers ready together go out in one write; a lone one is written at once (corking it
      // only costs the stream's buffering).
      if (!corked && this.queue[0]?.out !== undefined) {
        this.socket.cork();
        corked = true;
      }
      this.socket.write(exchange.out!);
      exchange.out = '';
      if (exchange.closeAfter) {
        this.closeAfterWrite();
        break;
      }
      const next = this.queue[0];
      if (next) this.start(next);
    }
    this.flushing = false;
    if (corked) this.socket.uncork();
    if (!this.closed && this.queue.length <= 1 && !this.paused) this.socket.resume();
  }

  private closeAfterWrite(): void {
    this.closed = true;
    this.lastRequestSeen = true;
    this.socket.end();
    // Whatever was queued behind is never answered on this connection.
    for (const rest of this.queue.splice(0)) rest.abort();
  }

  private onParseError(err: Error & { code?: string }): void {
    this.lastRequestSeen = true;
    const failure =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? new CaptureError('headers_too_large', `request line and headers exceed ${this.options.maxHeaderBytes} bytes`)
        : new CaptureError('malformed_request', `malformed HTTP/1.1 request (${err.code ?? 'parse error'})`);
    const { status, body } = captureErrorResponse(failure);
    const answer = { status, body: JSON.stringify(body), closeConnection: true };
    const interrupted = this.current;
    this.current = undefined;
    if (interrupted && !interrupted.requestComplete) return interrupted.interrupt(answer);
    // Answered after everything before it, like any other request.
    const exchange = new Exchange(this, 'invalid', '', '', [], false);
    exchange.requestComplete = true;
    this.queue.push(exchange);
    exchange.answer(answer);
  }

  private onClose(): void {
    this.closed = true;
    this.parser.close();
    this.current?.abort();
    for (const exchange of this.queue.splice(0)) exchange.abort();
  }

  private takePartialHeaders(): string[] {
    const headers = this.partialHeaders;
    this.partialHeaders = [];
    return headers;
  }

  private takePartialUrl(): string {
    const url = this.partialUrl;
    this.partialUrl = '';
    return url;
  }
}
