// Answers: status lines, CORS, corked JSON answers. uWS rules: a response must get onAborted
// before any asynchronous work, must never be touched after abort, and writes that happen
// outside the handler's own tick must be corked.
import type { HttpResponse } from './uws.js';

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  204: '204 No Content',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  413: '413 Payload Too Large',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

/** Per-request facts read while uWS still lets us read the request. */
export interface ResponseState {
  aborted: boolean;
  /** The request's Origin header, mirrored for CORS. */
  origin: string;
}

export interface Answer {
  status: number;
  body?: string;
  headers?: Readonly<Record<string, string>>;
  contentType?: string;
  closeConnection?: boolean;
}

export function respond(res: HttpResponse, state: ResponseState, answer: Answer): void {
  if (state.aborted) return;
  res.cork(() => {
    res.writeStatus(statusLine(answer.status));
    if (state.origin) {
      res.writeHeader('Access-Control-Allow-Origin', state.origin);
      res.writeHeader('Access-Control-Allow-Credentials', 'true');
      res.writeHeader('Vary', 'Origin');
    }
    if (answer.headers) for (const k in answer.headers) res.writeHeader(k, answer.headers[k]!);
    if (answer.status === 204) {
      res.endWithoutBody(0, answer.closeConnection);
      return;
    }
    res.writeHeader('Content-Type', answer.contentType ?? 'application/json');
    res.end(answer.body ?? '', answer.closeConnection);
  });
  state.aborted = true; // answered: nothing may touch `res` again
}
