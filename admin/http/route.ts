// An API route as data: method, path, required scope, documented schemas and a handler that is
// a function of the parsed request. The Fastify adapter (app.ts) registers these, the OpenAPI
// document (openapi.ts) is generated from the same definitions.
import type { z } from 'zod';
import type { Scope } from '../auth/scopes.js';
import type { Services } from '../services.js';
import { validate } from './validation.js';

/** Who is calling: a personal API key and its user. */
export interface Principal {
  readonly userId: number;
  readonly userUuid: string;
  readonly keyId: string;
  readonly scopes: readonly string[];
  /** null: every organization the user belongs to. */
  readonly scopedOrganizations: readonly string[] | null;
}

export interface RequestContext<P> {
  readonly principal: Principal;
  readonly params: P;
  /** Query string parameters (a repeated one as an array). */
  readonly query: Record<string, unknown>;
  /** Absolute URL of the request (pagination links are built from it). */
  readonly url: URL;
  /** The parsed JSON body (undefined without one). */
  readonly rawBody: unknown;
  /**
   * Validates the body against `schema` (a missing body counts as `{}`). Handlers call it
   * after loading the resource, so a caller without access gets 404, never a validation hint.
   */
  readonly body: <T extends z.ZodType>(schema: T) => z.output<T>;
  readonly services: Services;
}

export interface RouteResult {
  status: 200 | 201 | 204;
  /** Omitted: empty body. */
  body?: unknown;
}

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface RouteSpec<P extends z.ZodType> {
  method: HttpMethod;
  /** Fastify form with trailing slash, e.g. `/api/organizations/:organization_id/domains/`. */
  path: string;
  scope: Scope;
  operationId: string;
  summary: string;
  tag: string;
  /** Path parameters; a value that fails here answers 404 (it cannot name an existing row). */
  params: P;
  /** Documented request body (also what handlers pass to ctx.body). */
  requestBody?: z.ZodType;
  /** Adds limit/offset query parameters to the document. */
  paginated?: boolean;
  /** Further documented query parameters (optional ones; the handler reads and checks them). */
  query?: z.ZodObject;
  response: { status: 200 | 201 | 204; description: string; schema?: z.ZodType };
  /** Extra documented 4xx answers besides the ones every route has. */
  errors?: readonly number[];
  handler: (ctx: RequestContext<z.output<P>>) => Promise<RouteResult>;
}

export type Route = RouteSpec<z.ZodType>;

export function defineRoute<P extends z.ZodType>(spec: RouteSpec<P>): Route {
  return spec;
}

/** Builds the body accessor of a request. */
export function bodyReader(raw: unknown): <T extends z.ZodType>(schema: T) => z.output<T> {
  return (schema) => validate(schema, raw === undefined ? {} : raw);
}
