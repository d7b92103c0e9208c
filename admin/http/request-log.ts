// What the request log shows of a request: Fastify's fields, with the URL's credentials
// redacted. A personal API key may come as `?personal_api_key=` (PostHog accepts it there), and
// the value is a credential whatever it looks like (a wrong or mistyped key is still someone's key).
import type { FastifyRequest } from 'fastify';
import { REDACTED, type Logger } from '../../lib/index.js';
import { API_KEY_FIELD } from './authenticate.js';

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/** `url` with the value of every `personal_api_key` query parameter (however its name is encoded) redacted. */
export function redactUrl(url: string): string {
  const start = url.indexOf('?');
  if (start < 0) return url;
  const query = url
    .slice(start + 1)
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      const name = eq < 0 ? part : part.slice(0, eq);
      return decodedName(name) === API_KEY_FIELD ? `${name}=${REDACTED}` : part;
    });
  return `${url.slice(0, start)}?${query.join('&')}`;
}

/** The `req` field of request log lines (Fastify's shape). */
function requestForLog(request: FastifyRequest) {
  return {
    method: request.method,
    url: redactUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

/** A logger for Fastify whose request lines never show a key given in the URL. */
export function requestLogger(log: Logger): Logger {
  return log.child({}, { serializers: { req: requestForLog } });
}
