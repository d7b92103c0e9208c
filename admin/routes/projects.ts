// /api/projects/ and /api/organizations/:organization_id/projects/: projects and their API keys.
// Every change reaches the spate-projects KV bucket before the answer (ingest nodes accept a
// project's events once its key is there).
import { z } from 'zod';
import { inTransaction, pgErrorCode, PG_FOREIGN_KEY_VIOLATION } from '../db/pool.js';
import { insufficientLevel, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute } from '../http/route.js';
import { organizationChildPath, paginatedProjects, projectCreate, projectPath, projectSchema, projectUpdate } from '../schemas.js';
import { LEVEL } from '../store/organizations.js';
import { projectLimitSettings } from '../config.js';
import { checkLimitFields } from '../project-limits.js';
import { createProject, deleteProject, findVisibleProject, listProjects, projectJson, resetProjectToken, updateProject } from '../store/projects.js';
import { organizationOr404 } from './common.js';

const tag = 'projects';

export const projectRoutes = [
  defineRoute({
    method: 'GET',
    path: '/api/projects/',
    scope: 'project:read',
    operationId: 'projects_list',
    summary: 'List the projects of every organization the key may see',
    tag,
    params: z.object({}),
    paginated: true,
    response: { status: 200, description: 'A page of projects', schema: paginatedProjects },
    async handler({ principal, query, url, services }) {
      const page = pageOf(query);
      const { count, rows } = await listProjects(services.pool, principal, undefined, page);
      return { status: 200, body: paginate(url, page, count, rows.map(projectJson)) };
    },
  }),

  defineRoute({
    method: 'GET',
    path: '/api/projects/:id/',
    scope: 'project:read',
    operationId: 'projects_retrieve',
    summary: 'Retrieve a project',
    tag,
    params: projectPath,
    response: { status: 200, description: 'The project', schema: projectSchema },
    async handler({ principal, params, services }) {
      const project = await findVisibleProject(services.pool, principal, params.id);
      if (!project) throw notFound();
      return { status: 200, body: projectJson(project) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: '/api/projects/:id/',
    scope: 'project:write',
    operationId: 'projects_partial_update',
    summary: "Rename a project or set its capture limits (admins and owners; a limit may not exceed the cluster's)",
    tag,
    params: projectPath,
    requestBody: projectUpdate,
    response: { status: 200, description: 'The updated project', schema: projectSchema },
    errors: [403],
    async handler({ principal, params, body, services }) {
      const project = await inTransaction(services.pool, async (db) => {
        const found = await findVisibleProject(db, principal, params.id, true);
        if (!found) throw notFound();
        if (found.level < LEVEL.admin) throw insufficientLevel();
        const fields = body(projectUpdate);
        checkLimitFields(fields, projectLimitSettings(services.config));
        return Object.values(fields).every((v) => v === undefined) ? found : updateProject(db, found.id, fields);
      });
      // The limits travel in the key's record: ingest nodes apply them within a second.
      await services.projectsKv.sync([project.api_token]);
      return { status: 200, body: projectJson(project) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: '/api/projects/:id/reset_token/',
    scope: 'project:write',
    operationId: 'projects_reset_token',
    summary: 'Replace the project API key with a new one; the old key stops being accepted (admins and owners)',
    tag,
    params: projectPath,
    response: { status: 200, description: 'The project with its new api_token', schema: projectSchema },
    errors: [403],
    async handler({ principal, params, services }) {
      const { project, oldToken } = await inTransaction(services.pool, async (db) => {
        const found = await findVisibleProject(db, principal, params.id, true);
        if (!found) throw notFound();
        if (found.level < LEVEL.admin) throw insufficientLevel();
        return { project: await resetProjectToken(db, found.id), oldToken: found.api_token };
      });
      await services.projectsKv.sync([oldToken, project.api_token]);
      return { status: 200, body: projectJson(project) };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: '/api/projects/:id/',
    scope: 'project:write',
    operationId: 'projects_destroy',
    summary: 'Delete a project; its API key stops being accepted (admins and owners)',
    tag,
    params: projectPath,
    response: { status: 204, description: 'Deleted' },
    errors: [403],
    async handler({ principal, params, services }) {
      const token = await inTransaction(services.pool, async (db) => {
        const found = await findVisibleProject(db, principal, params.id, true);
        if (!found) throw notFound();
        if (found.level < LEVEL.admin) throw insufficientLevel();
        return deleteProject(db, found.id);
      });
      if (token) await services.projectsKv.sync([token]);
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'GET',
    path: '/api/organizations/:organization_id/projects/',
    scope: 'project:read',
    operationId: 'organization_projects_list',
    summary: "List an organization's projects",
    tag,
    params: organizationChildPath,
    paginated: true,
    response: { status: 200, description: 'A page of projects', schema: paginatedProjects },
    async handler({ principal, params, query, url, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const page = pageOf(query);
      const { count, rows } = await listProjects(services.pool, principal, org.id, page);
      return { status: 200, body: paginate(url, page, count, rows.map(projectJson)) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: '/api/organizations/:organization_id/projects/',
    scope: 'project:write',
    operationId: 'organization_projects_create',
    summary: "Create a project with a new project API key, optionally with capture limits (admins and owners; a limit may not exceed the cluster's)",
    tag,
    params: organizationChildPath,
    requestBody: projectCreate,
    response: { status: 201, description: 'The new project', schema: projectSchema },
    errors: [403],
    async handler({ principal, params, body, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id, { minLevel: LEVEL.admin });
      const { name, ...limits } = body(projectCreate);
      checkLimitFields(limits, projectLimitSettings(services.config));
      let project;
      try {
        project = await createProject(services.pool, org.id, name, limits);
      } catch (err) {
        if (pgErrorCode(err) === PG_FOREIGN_KEY_VIOLATION) throw notFound();
        throw err;
      }
      await services.projectsKv.sync([project.api_token]);
      return { status: 201, body: projectJson(project) };
    },
  }),
];
