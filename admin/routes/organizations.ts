// /api/organizations/: organizations the key's user belongs to.
import { inTransaction } from '../db/pool.js';
import { apiError } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute } from '../http/route.js';
import {
  organizationCreate,
  organizationPath,
  organizationSchema,
  organizationUpdate,
  paginatedOrganizations,
} from '../schemas.js';
import {
  createOrganization,
  deleteOrganization,
  getOrganizationJson,
  LEVEL,
  listOrganizations,
  pluginConfigsElsewhere,
  updateOrganization,
} from '../store/organizations.js';
import { organizationOr404 } from './common.js';
import { z } from 'zod';

const tag = 'organizations';
const noParams = z.object({});

export const organizationRoutes = [
  defineRoute({
    method: 'GET',
    path: '/api/organizations/',
    scope: 'organization:read',
    operationId: 'organizations_list',
    summary: 'List the organizations the key may see',
    tag,
    params: noParams,
    paginated: true,
    response: { status: 200, description: 'A page of organizations', schema: paginatedOrganizations },
    async handler({ principal, query, url, services }) {
      const page = pageOf(query);
      const { count, results } = await listOrganizations(services.pool, principal, page);
      return { status: 200, body: paginate(url, page, count, results) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: '/api/organizations/',
    scope: 'organization:write',
    operationId: 'organizations_create',
    summary: 'Create an organization (the caller becomes its owner; a default project is created)',
    tag,
    params: noParams,
    requestBody: organizationCreate,
    response: { status: 201, description: 'The new organization', schema: organizationSchema },
    async handler({ principal, body, services }) {
      const fields = body(organizationCreate);
      const { organization, token } = await inTransaction(services.pool, async (db) => {
        const created = await createOrganization(db, principal.userId, fields);
        return { organization: await getOrganizationJson(db, principal.userId, created.id), token: created.project.api_token };
      });
      await services.projectsKv.sync([token]);
      return { status: 201, body: organization };
    },
  }),

  defineRoute({
    method: 'GET',
    path: '/api/organizations/:id/',
    scope: 'organization:read',
    operationId: 'organizations_retrieve',
    summary: 'Retrieve an organization (`@current` names the earliest one joined)',
    tag,
    params: organizationPath,
    response: { status: 200, description: 'The organization', schema: organizationSchema },
    async handler({ principal, params, services }) {
      const org = await organizationOr404(services.pool, principal, params.id);
      return { status: 200, body: await getOrganizationJson(services.pool, principal.userId, org.id) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: '/api/organizations/:id/',
    scope: 'organization:write',
    operationId: 'organizations_partial_update',
    summary: 'Update an organization (admins and owners)',
    tag,
    params: organizationPath,
    requestBody: organizationUpdate,
    response: { status: 200, description: 'The updated organization', schema: organizationSchema },
    errors: [403],
    async handler({ principal, params, body, services }) {
      const organization = await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.id, { lock: true, minLevel: LEVEL.admin });
        await updateOrganization(db, org.id, body(organizationUpdate));
        return getOrganizationJson(db, principal.userId, org.id);
      });
      return { status: 200, body: organization };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: '/api/organizations/:id/',
    scope: 'organization:write',
    operationId: 'organizations_destroy',
    summary: 'Delete an organization with its projects, members, invites and domains (owners only)',
    tag,
    params: organizationPath,
    response: { status: 204, description: 'Deleted' },
    errors: [400, 403],
    async handler({ principal, params, services }) {
      const tokens = await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.id, { lock: true, minLevel: LEVEL.owner });
        // Its plugins go with it, and so would other organizations' configs of them.
        const elsewhere = await pluginConfigsElsewhere(db, org.id);
        if (elsewhere > 0) {
          throw apiError(
            'validation_error',
            `${elsewhere} plugin config(s) in other organizations' projects use this organization's global plugins; they must be removed there first.`,
          );
        }
        return deleteOrganization(db, org.id);
      });
      await services.projectsKv.sync(tokens);
      return { status: 204 };
    },
  }),
];
