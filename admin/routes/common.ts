// Checks every organization route shares: the organization must be visible to the key (else
// 404, exactly as if it did not exist) and the caller's level high enough for writes.
import { insufficientLevel, notFound } from '../errors.js';
import type { Queryable } from '../db/pool.js';
import type { Principal } from '../http/route.js';
import { findOrganizationAccess, type OrganizationAccess } from '../store/organizations.js';

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
