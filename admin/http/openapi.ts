// The OpenAPI 3.1 document served at GET /api/schema/, generated from the route table and
// the same zod schemas that validate requests (zod's JSON Schema output is draft 2020-12,
// which is what OpenAPI 3.1 uses).
import { z } from 'zod';
import { apiSchemas } from '../schemas.js';
import { DEFAULT_LIMIT, MAX_LIMIT } from './pagination.js';
import type { Route } from './route.js';

type Json = Record<string, unknown>;

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });

function idOf(schema: z.ZodType | undefined): string | undefined {
  return schema ? apiSchemas.get(schema)?.id : undefined;
}

function withoutDialect(schema: Json): Json {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

function errorResponse(description: string) {
  return { description, content: { 'application/json': { schema: ref('Error') } } };
}

function operation(route: Route): Json {
  const parameters: Json[] = [];
  const shape = route.params instanceof z.ZodObject ? (route.params.shape as Record<string, z.ZodType>) : {};
  for (const [name, schema] of Object.entries(shape)) {
    parameters.push({
      name,
      in: 'path',
      required: true,
      schema: withoutDialect(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })),
    });
  }
  if (route.paginated) {
    parameters.push(
      { name: 'limit', in: 'query', required: false, description: `Results per page (default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT}: a larger value means ${MAX_LIMIT})`, schema: { type: 'integer', minimum: 1 } },
      { name: 'offset', in: 'query', required: false, description: 'Index of the first result (default 0)', schema: { type: 'integer', minimum: 0 } },
    );
  }

  const queryShape = route.query ? (route.query.shape as Record<string, z.ZodType>) : {};
  for (const [name, schema] of Object.entries(queryShape)) {
    const { description, ...json } = withoutDialect(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }));
    parameters.push({ name, in: 'query', required: false, ...(description ? { description } : {}), schema: json });
  }
  const responses: Json = {};
  const okId = idOf(route.response.schema);
  if (route.response.schema && !okId) throw new Error(`${route.operationId}: response schema is not registered in apiSchemas`);
  responses[String(route.response.status)] = okId
    ? { description: route.response.description, content: { 'application/json': { schema: ref(okId) } } }
    : { description: route.response.description };
  const bodyId = idOf(route.requestBody);
  if (route.requestBody && !bodyId) throw new Error(`${route.operationId}: request schema is not registered in apiSchemas`);
  if (bodyId) responses['400'] = errorResponse('Invalid body (validation_error and the more specific codes), or malformed JSON (parse_error)');
  else if (route.errors?.includes(400)) responses['400'] = errorResponse('Invalid query parameters, or the action is refused in this state (validation_error)');
  responses['401'] = errorResponse('No personal API key (not_authenticated) or an unknown one (authentication_failed)');
  responses['403'] = errorResponse(
    route.errors?.includes(403)
      ? "Missing scope, or the caller's membership level or the organization's plugins_access_level does not allow the action (permission_denied)"
      : 'Missing scope (permission_denied)',
  );
  responses['404'] = errorResponse('No such resource visible to this key (not_found)');
  if (bodyId) responses['415'] = errorResponse('Body is not application/json (unsupported_media_type)');
  if (route.errors?.includes(429)) responses['429'] = errorResponse('Too many invite emails for the organization or an address (throttled); Retry-After says when to try again');
  if (route.errors?.includes(503)) responses['503'] = errorResponse('DNS could not be asked (verification_unavailable)');

  return {
    operationId: route.operationId,
    summary: route.summary,
    tags: [route.tag],
    description: `Required API key scope: \`${route.scope}\` (\`:write\` also grants \`:read\`; \`*\` grants everything).`,
    security: [{ PersonalApiKey: [route.scope] }],
    parameters,
    ...(bodyId ? { requestBody: { required: true, content: { 'application/json': { schema: ref(bodyId) } } } } : {}),
    responses,
  };
}

export function buildOpenApiDocument(routes: readonly Route[], version: string): Json {
  const { schemas } = z.toJSONSchema(apiSchemas, {
    io: 'input',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Json> };
  const components: Record<string, Json> = {};
  for (const [id, schema] of Object.entries(schemas)) {
    const { id: _id, $id: _ref, ...rest } = withoutDialect(schema);
    components[id] = rest;
  }

  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation(route);
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Spate management API',
      version,
      description:
        'Organizations, domains, invites, members, projects, batch exports, pipeline plugins and plugin configs of a Spate cluster. ' +
        'Authenticate with `Authorization: Bearer <personal API key>`. Errors are ' +
        '`{"type","code","detail","attr"}`. ' +
        `Lists take \`limit\` (default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT}) and \`offset\`.`,
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        PersonalApiKey: { type: 'http', scheme: 'bearer', description: 'A personal API key (phx_…) with the scopes each operation names' },
      },
    },
  };
}
