import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAdminFixture, type AdminFixture } from '../test/admin/harness.js';
import { apiRoutes } from './routes/index.js';
import { DOMAIN_PATTERN } from './schemas.js';

let f: AdminFixture;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the document is checked by the assertions
let doc: any;

beforeAll(async () => {
  f = await startAdminFixture();
  const res = await f.api('GET', '/api/schema/');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = res.body;
});
afterAll(async () => f?.stop());

function refs(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const v of value) refs(v, out);
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe('openapi', () => {
  it('openapi - GET /api/schema/ is a valid OpenAPI 3.1 document, served without a key', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('openapi - every route is documented once, with its scope, parameters and answers', () => {
    const operationIds = new Set<string>();
    for (const route of apiRoutes) {
      const op = doc.paths[route.path.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()];
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      expect(operationIds.has(op.operationId)).toBe(false);
      operationIds.add(op.operationId);
      expect(op.security).toEqual([{ PersonalApiKey: [route.scope] }]);
      const pathParams = [...route.path.matchAll(/:(\w+)/g)].map((m) => m[1]);
      expect(op.parameters.filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name)).toEqual(pathParams);
      expect(Object.keys(op.responses)).toContain(String(route.response.status));
      for (const status of ['401', '403', '404']) expect(op.responses[status], status).toBeDefined();
      if (route.paginated) expect(op.parameters.map((p: { name: string }) => p.name)).toEqual(expect.arrayContaining(['limit', 'offset']));
    }
    const documented = Object.values(doc.paths).reduce<number>((n, ops) => n + Object.keys(ops as object).length, 0);
    expect(documented).toBe(apiRoutes.length);
  });

  it('openapi - every $ref resolves to a component', () => {
    for (const ref of refs(doc)) {
      const name = ref.replace('#/components/schemas/', '');
      expect(doc.components.schemas[name], ref).toBeDefined();
    }
  });

  it('openapi - request schemas are the ones validation uses (same limits, patterns and required fields)', () => {
    const s = doc.components.schemas;
    expect(s.OrganizationCreate.required).toEqual(['name']);
    expect(s.OrganizationCreate.properties.name).toMatchObject({ type: 'string', minLength: 1, maxLength: 64 });
    expect(s.DomainCreate.required).toEqual(['domain']);
    expect(s.DomainCreate.properties.domain.pattern).toBe(DOMAIN_PATTERN.source);
    expect(s.OrganizationInviteCreate.required).toEqual(['target_email']);
    expect(s.OrganizationInviteCreate.properties.level.enum).toEqual([1, 8, 15]);
    expect(s.OrganizationInviteBulkCreate).toMatchObject({ type: 'array', items: { $ref: '#/components/schemas/OrganizationInviteCreate' } });
    expect(s.PatchedOrganizationMember.required).toEqual(['level']);
    expect(s.Organization.properties.member_count.type).toBe('string');
    expect(s.Error.required).toEqual(['type', 'code', 'detail', 'attr']);
  });

  it('openapi - batch export, plugin and plugin config schemas carry their required fields and choices', () => {
    const s = doc.components.schemas;
    expect([...s.BatchExportCreate.required].sort()).toEqual(['destination', 'interval', 'name']);
    expect(s.BatchExportCreate.properties.interval.enum).toEqual(['hour', 'day', 'week', 'every 5 minutes', 'every 15 minutes']);
    expect(s.BatchExportCreate.properties.model.enum).toEqual(['events', 'persons']);
    expect(s.BatchExportCreate.properties.destination.properties.type.enum).toEqual(['S3', 'Postgres', 'HTTP', 'NoOp']);
    expect(s.PatchedBatchExport.required ?? []).toEqual([]);
    expect(s.BatchExport.properties.latest_runs.items).toEqual({ $ref: '#/components/schemas/BatchExportRun' });
    expect(s.BatchExportRun.properties.status.enum).toEqual(['Starting', 'Running', 'Completed', 'Failed', 'FailedRetryable', 'Cancelled', 'TimedOut', 'Terminated']);
    expect(s.PipelinePluginCreate.properties.plugin_type.enum).toEqual(['local', 'custom', 'repository', 'source', 'inline']);
    expect(s.PipelinePluginCreate.required ?? []).toEqual([]);
    expect([...s.PluginConfigCreate.required].sort()).toEqual(['order', 'plugin']);
    expect(s.PluginConfigCreate.properties.order).toMatchObject({ type: 'integer', maximum: 2147483647 });
    expect(s.PluginConfigList).toMatchObject({ type: 'array', items: { $ref: '#/components/schemas/PluginConfig' } });
    expect(s.PluginLogEntry.properties.type.enum).toEqual(['DEBUG', 'LOG', 'INFO', 'WARN', 'ERROR']);
  });

  it('openapi - the plugin log list documents its filters as query parameters', () => {
    const op = doc.paths['/api/projects/{project_id}/plugin_configs/{plugin_config_id}/logs/'].get;
    const query = Object.fromEntries(op.parameters.filter((p: { in: string }) => p.in === 'query').map((p: { name: string }) => [p.name, p]));
    expect(Object.keys(query).sort()).toEqual(['after', 'before', 'limit', 'offset', 'search', 'type_filter']);
    expect(query.type_filter.schema.enum).toEqual(['DEBUG', 'LOG', 'INFO', 'WARN', 'ERROR']);
    expect(query.after.schema).toMatchObject({ type: 'string', format: 'date-time' });
    expect(op.responses['200'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/PaginatedPluginLogEntryList' });
    const rearrange = doc.paths['/api/projects/{project_id}/plugin_configs/rearrange/'].patch;
    expect(rearrange.security).toEqual([{ PersonalApiKey: ['plugin:write'] }]);
    expect(doc.paths['/api/organizations/{organization_id}/pipeline_transformations/{id}/'].delete).toBeUndefined();
    expect(doc.paths['/api/organizations/{organization_id}/pipeline_destinations/{id}/'].delete).toBeDefined();
  });
});
