// Answers as bytes on the wire: status line, CORS, Date, Content-Length.

const STATUS_TEXT: Record<number, string> = {
  100: '100 Continue',
  200: '200 OK',
  204: '204 No Content',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  408: '408 Request Timeout',
  413: '413 Payload Too Large',
  429: '429 Too Many Requests',
  431: '431 Request Header Fields Too Large',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

export interface Answer {
  status: number;
  body?: string;
  headers?: Readonly<Record<string, string>>;
  contentType?: string;
  closeConnection?: boolean;
}

// The Date header changes once a second: format it once a second.
let dateSecond = -1;
let dateHeader = '';
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateHeader = new Date(now).toUTCString();
  }
  return dateHeader;
}

/** The whole answer as one string (written as UTF-8); `origin` is mirrored for CORS. */
export function formatAnswer(answer: Answer, origin: string, close: boolean): string {
  let head = `HTTP/1.1 ${statusLine(answer.status)}\r\nDate: ${httpDate()}\r\n`;
  if (origin) head += `Access-Control-Allow-Origin: ${origin}\r\nAccess-Control-Allow-Credentials: true\r\nVary: Origin\r\n`;
  if (answer.headers) for (const k in answer.headers) head += `${k}: ${answer.headers[k]!}\r\n`;
  if (close) head += 'Connection: close\r\n';
  if (answer.status === 204) return `${head}\r\n`;
  const body = answer.body ?? '';
  return `${head}Content-Type: ${answer.contentType ?? 'application/json'}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
