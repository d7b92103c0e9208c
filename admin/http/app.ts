// The HTTP adapter: Fastify does routing, body reading, content-type dispatch, body limits and
// graceful close; this file wires our route table into it and makes every answer, including
// the framework's own refusals, use the API's error envelope. Handlers never see Fastify.
import Fastify, { type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import { ApiError, Counter, type Registry } from '../../lib/index.js';
import type { Services } from '../services.js';
import { apiError, toErrorResponse } from '../errors.js';
import { API_KEY_FIELD, authenticate, requireScope } from './authenticate.js';
import { buildOpenApiDocument } from './openapi.js';
import { requestLogger } from './request-log.js';
import type { PageRoute } from './page-route.js';
import { bodyReader, type Route } from './route.js';
import { validate } from './validation.js';

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export interface AppOptions {
  routes: readonly Route[];
  services: Services;
  metrics: Registry;
  version: string;
  /** GET routes outside the API: the live page (admin/live). */
  pages?: readonly PageRoute[];
  /** Readiness checks by name (e.g. NATS connected, PostgreSQL answering) for GET /_ready. */
  readiness?: () => Promise<Record<string, boolean>>;
}

/** Fastify's own errors that are the client's doing, as our codes. */
function translateFrameworkError(err: FastifyError, request: FastifyRequest): ApiError {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return apiError('unsupported_media_type', `Unsupported media type "${request.headers['content-type'] ?? ''}" in request.`);
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return apiError('request_too_large');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return apiError('parse_error', 'Request body size did not match Content-Length.');
    case 'FST_ERR_BAD_URL':
      return apiError('not_found', 'Endpoint not found.');
    // An id longer than any real one names nothing.
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return apiError('not_found');
    default:
      throw err;
  }
}

function sendError(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  let mapped: unknown = err;
  if (!(err instanceof ApiError) && typeof err === 'object' && err !== null && 'code' in err && String(err.code).startsWith('FST_')) {
    try {
      mapped = translateFrameworkError(err as FastifyError, request);
    } catch {
      mapped = err;
    }
  }
  const { status, headers, body } = toErrorResponse(mapped);
  if (status >= 500) {
    // A declared 5xx (DNS unavailable) is an outside outage; anything else is our bug.
    if (body.code === 'error') request.log.error({ err }, 'request failed');
    else request.log.warn({ code: body.code, detail: body.detail }, 'request failed');
  }
  void reply.code(status).headers(headers).send(body);
}

export function buildApp(options: AppOptions) {
  const { services } = options;
  const { requestTimeout } = services.config;
  const headersTimeout = Math.min(services.config.headersTimeout, requestTimeout);
  const app = Fastify({
    loggerInstance: requestLogger(services.log),
    bodyLimit: services.config.bodyLimit,
    // Node answers 408 and closes the connection of a client too slow with its headers or its
    // whole request (Fastify's default is no limit at all, so a few slow clients could hold
    // sockets and memory forever). Node looks for expired requests every
    // connectionsCheckingInterval (30 s by default), far coarser than the timeouts.
    requestTimeout,
    http: { requestTimeout, headersTimeout, connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeout / 4))) },
    trustProxy: services.config.trustProxy,
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    return503OnClosing: true,
    frameworkErrors: (err, request, reply) => sendError(err, request, reply),
  });

  // Bodies are JSON, nothing else (anything else: 415). An empty body is "no body".
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
    const source = typeof text === 'string' ? text : text.toString('utf8');
    if (source.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(source));
    } catch (err) {
      done(apiError('parse_error', `JSON parse error - ${(err as Error).message}`));
    }
  });

  const requests = new Counter({
    name: 'spate_admin_http_requests_total',
    help: 'Admin API requests answered, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [options.metrics],
  });
  app.addHook('onResponse', async (request, reply) => {
    requests.inc({ route: request.routeOptions.url ?? 'unmatched', method: request.method, status: String(reply.statusCode) });
  });

  app.setErrorHandler((err, request, reply) => sendError(err, request, reply));
  app.setNotFoundHandler((request, reply) => sendError(apiError('not_found', 'Endpoint not found.'), request, reply));

  const methodsByPath = new Map<string, Set<string>>();
  const addPath = (path: string, method: string) => {
    const set = methodsByPath.get(path) ?? new Set<string>();
    set.add(method);
    methodsByPath.set(path, set);
  };

  for (const route of options.routes) {
    addPath(route.path, route.method);
    app.route({
      method: route.method,
      url: route.path,
      handler: async (request, reply) => {
        const query = (request.query ?? {}) as Record<string, unknown>;
        const principal = await authenticate(services.pool, services.log, {
          authorization: request.headers.authorization,
          body: request.body,
          query,
        });
        requireScope(principal, route.scope);
        let params: unknown;
        try {
          params = validate(route.params, request.params);
        } catch {
          // A malformed id cannot name anything that exists.
          throw apiError('not_found');
        }
        // The key is a credential, never data: handlers (which may store a body verbatim, as
        // update_source does) and the links they build never see it.
        const rawBody = withoutApiKey(request.body);
        const result = await route.handler({
          principal,
          params,
          query,
          url: requestUrl(request),
          rawBody,
          body: bodyReader(rawBody),
          services,
        });
        reply.code(result.status);
        return result.body === undefined ? reply.send() : reply.send(result.body);
      },
    });
  }

  const schemaDocument = buildOpenApiDocument(options.routes, options.version);
  addPath('/api/schema/', 'GET');
  app.get('/api/schema/', (_request, reply) => reply.type('application/json').send(schemaDocument));

  addPath('/_health', 'GET');
  app.get('/_health', () => Promise.resolve({ status: 'ok' }));
  addPath('/_ready', 'GET');
  app.get('/_ready', async (_request, reply) => {
    const checks = options.readiness ? await options.readiness() : {};
    const ready = Object.values(checks).every(Boolean);
    return reply.code(ready ? 200 : 503).send({ ready, checks });
  });
  addPath('/metrics', 'GET');
  app.get('/metrics', async (_request, reply) => reply.type(options.metrics.contentType).send(await options.metrics.metrics()));

  for (const page of options.pages ?? []) {
    addPath(page.path, 'GET');
    app.get(page.path, async (request, reply) => {
      const answer = await page.handler({ headers: request.headers, query: (request.query ?? {}) as Record<string, unknown> });
      return reply.code(answer.status).headers(answer.headers ?? {}).type(answer.contentType).send(answer.body);
    });
  }

  // Fastify answers an unknown method on a known path with 404; the API says 405 and names
  // the allowed ones.
  for (const [path, methods] of methodsByPath) {
    const allowed = [...methods, ...(methods.has('GET') ? ['HEAD'] : [])];
    const others = ALL_METHODS.filter((m) => !allowed.includes(m));
    if (others.length === 0) continue;
    app.route({
      method: others,
      url: path,
      handler: (request) => {
        throw new ApiError('method_not_allowed', `Method "${request.method}" not allowed.`, { headers: { allow: allowed.join(', ') } });
      },
    });
  }

  return app;
}

/**
 * The absolute URL the client used (X-Forwarded-* only when ADMIN_TRUST_PROXY is set), less a
 * `personal_api_key` query parameter, so pagination links never repeat the caller's key.
 */
function requestUrl(request: FastifyRequest): URL {
  const host = request.host || `${request.hostname}`;
  let url: URL;
  try {
    url = new URL(request.url, `${request.protocol}://${host}`);
  } catch {
    url = new URL(request.url, 'http://localhost');
  }
  url.searchParams.delete(API_KEY_FIELD);
  return url;
}

function withoutApiKey(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !(API_KEY_FIELD in body)) return body;
  const { [API_KEY_FIELD]: _key, ...rest } = body as Record<string, unknown>;
  return rest;
}
