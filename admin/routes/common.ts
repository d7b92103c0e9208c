// Checks every organization route shares: the organization must be visible to the key (else
// 404, exactly as if it did not exist) and the caller's level high enough for writes.
import { insufficientLevel, notFound } from '../errors.js';
import type { Queryable } from '../db/pool.js';
import type { Principal } from '../http/route.js';
import { findOrganizationAccess, type OrganizationAccess } from '../store/organizations.js';
import { findVisibleProject, type ProjectRow } from '../store/projects.js';

export async function organizationOr404(
  db: Queryable,
  principal: Principal,
  ref: string,
  options: { lock?: boolean; minLevel?: number } = {},
): Promise<OrganizationAccess> {
  const access = await findOrganizationAccess(db, principal, ref, options.lock ?? false);
  if (!access) throw notFound();
  if (options.minLevel !== undefined && access.level < options.minLevel) throw insufficientLevel();
  return access;
}

/** The organization's plugins_access_level: 0 none, 3 configure, 6 install, 9 root (global plugins). */
export async function pluginsAccessLevel(db: Queryable, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ plugins_access_level: number }>('select plugins_access_level from organizations where id = $1', [organizationId]);
  return rows[0]?.plugins_access_level ?? 0;
}

export { PLUGINS_ACCESS } from '../store/organizations.js';

/** The project if the key may see it (as /api/projects/:id/ decides), else 404. */
export async function projectOr404(db: Queryable, principal: Principal, projectId: number, lock = false): Promise<ProjectRow & { level: number }> {
  const project = await findVisibleProject(db, principal, projectId, lock);
  if (!project) throw notFound();
  return project;
}
