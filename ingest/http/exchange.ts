// One request and its answer on a connection: what route handlers see instead of sockets.
// Body chunks that arrive before a handler asks for them are kept and handed over in order.
import { formatAnswer, type Answer } from './respond.js';

const EMPTY = Buffer.alloc(0);

export interface ExchangeOwner {
  /** The answer is ready: write it when every earlier answer of the connection is written. */
  answered(exchange: Exchange): void;
  /** Stop / go on reading the connection (a body the node cannot take yet). */
  pauseReading(): void;
  resumeReading(): void;
  readonly remoteAddress: string | undefined;
}

export class Exchange {
  /** Set once the answer is given or the connection is gone: nothing may answer again. */
  finished = false;
  /** The connection closed before the answer was written. */
  aborted = false;
  /** The whole request, body included, has been read. */
  requestComplete = false;
  /** The answer, formatted, until it is written. */
  out: string | undefined;
  closeAfter: boolean;
  /** When its body must have arrived (ms), from the moment it is handed to its handler. */
  bodyDeadline = Number.POSITIVE_INFINITY;
  private abortHandler: (() => void) | undefined;
  private dataHandler: ((chunk: Buffer, isLast: boolean) => void) | undefined;
  private held: Buffer[] | undefined;

  constructor(
    private readonly owner: ExchangeOwner,
    readonly method: string,
    readonly path: string,
    readonly query: string,
    private readonly rawHeaders: readonly string[],
    keepAlive: boolean,
  ) {
    this.closeAfter = !keepAlive;
    // Without Content-Length or Transfer-Encoding an HTTP/1.1 request has no body: it is
    // complete with its head, and may be answered at once without closing the connection.
    const length = this.header('content-length');
    this.requestComplete = (length === '' || length === '0') && this.header('transfer-encoding') === '';
  }

  get remoteAddress(): string | undefined {
    return this.owner.remoteAddress;
  }

  /** A request header by its lower-case name; '' when absent. */
  header(name: string): string {
    const h = this.rawHeaders;
    for (let i = 0; i < h.length; i += 2) {
      const key = h[i]!;
      if (key.length === name.length && key.toLowerCase() === name) return h[i + 1]!;
    }
    return '';
  }

  onAborted(handler: () => void): void {
    this.abortHandler = handler;
  }

  /** Body chunks in order; the last call has isLast (and may carry no bytes). */
  onData(handler: (chunk: Buffer, isLast: boolean) => void): void {
    this.dataHandler = handler;
    const held = this.held;
    this.held = undefined;
    if (held) for (const chunk of held) handler(chunk, false);
    if (this.requestComplete) handler(EMPTY, true);
  }

  pauseBody(): void {
    this.owner.pauseReading();
  }

  resumeBody(): void {
    this.owner.resumeReading();
  }

  answer(answer: Answer, origin = ''): void {
    if (this.finished) return;
    this.finished = true;
    // A body not read to its end cannot be skipped to find the next request: close after.
    if (answer.closeConnection || !this.requestComplete) this.closeAfter = true;
    this.out = formatAnswer(answer, origin, this.closeAfter);
    this.owner.answered(this);
  }

  /**
   * The request cannot go on (its body is malformed or too slow): answer it now and tell its
   * handler, as if the client had gone, so it gives back what it holds.
   */
  interrupt(answer: Answer): void {
    if (this.finished) return;
    const handler = this.abortHandler;
    this.answer(answer);
    handler?.();
  }

  /** From the connection: a body chunk of this request. */
  deliver(chunk: Buffer): void {
    if (this.finished) return;
    if (this.dataHandler) this.dataHandler(chunk, false);
    else (this.held ??= []).push(chunk);
  }

  /** From the connection: the request's last byte was read. */
  complete(): void {
    if (this.requestComplete) return;
    this.requestComplete = true;
    if (!this.finished && this.dataHandler) this.dataHandler(EMPTY, true);
  }

  /** From the connection: it closed before this answer was written. */
  abort(): void {
    if (this.aborted || this.out !== undefined) return;
    this.aborted = true;
    this.finished = true;
    this.abortHandler?.();
  }
}
