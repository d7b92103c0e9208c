// /api/organizations/:organization_id/members/: who belongs to an organization, at which level.
// Changes run under a lock of the organization row, so two owners demoting each other at once
// cannot leave the organization without an owner.
import { inTransaction } from '../db/pool.js';
import { apiError, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute, type Principal } from '../http/route.js';
import { memberPath, memberSchema, memberUpdate, organizationChildPath, paginatedMembers } from '../schemas.js';
import { countOwners, deleteMember, findMemberByUserId, findMemberByUserUuid, listMembers, memberJson, setMemberLevel } from '../store/members.js';
import { LEVEL, type OrganizationAccess } from '../store/organizations.js';
import type { Queryable } from '../db/pool.js';
import { organizationOr404 } from './common.js';

const tag = 'members';
const base = '/api/organizations/:organization_id/members/';

const denied = (detail: string) => apiError('permission_denied', detail);

async function targetOr404(db: Queryable, org: OrganizationAccess, principal: Principal, ref: string) {
  const member = ref === '@me' ? await findMemberByUserId(db, org.id, principal.userId) : await findMemberByUserUuid(db, org.id, ref);
  if (!member) throw notFound();
  return member;
}

/** Editing someone else: only admins, and only people at or below your own level. */
function checkMayEditOther(requesterLevel: number, targetLevel: number): void {
  if (requesterLevel < LEVEL.admin) throw denied('You can only edit others if you are an admin.');
  if (targetLevel > requesterLevel) throw denied('You can only edit others with level lower or equal to you.');
}

export const memberRoutes = [
  defineRoute({
    method: 'GET',
    path: base,
    scope: 'organization_member:read',
    operationId: 'members_list',
    summary: "List an organization's members, newest first (`?order=joined_at` for oldest first)",
    tag,
    params: organizationChildPath,
    paginated: true,
    response: { status: 200, description: 'A page of members', schema: paginatedMembers },
    async handler({ principal, params, query, url, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const page = pageOf(query);
      const order = query.order === 'joined_at' ? 'joined_at' : '-joined_at';
      const { count, rows } = await listMembers(services.pool, org.id, order, page);
      return { status: 200, body: paginate(url, page, count, rows.map(memberJson)) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: `${base}:user__uuid/`,
    scope: 'organization_member:write',
    operationId: 'members_partial_update',
    summary: "Change a member's level (`@me` names yourself, though your own level cannot change)",
    tag,
    params: memberPath,
    requestBody: memberUpdate,
    response: { status: 200, description: 'The updated member', schema: memberSchema },
    errors: [403],
    async handler({ principal, params, body, services }) {
      const member = await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.organization_id, { lock: true });
        const target = await targetOr404(db, org, principal, params.user__uuid);
        const { level } = body(memberUpdate);
        // The order of these checks (and their words) follows PostHog's validate_update.
        if (target.user_id === principal.userId) throw denied("You can't change your own access level.");
        if (level === LEVEL.owner && org.level !== LEVEL.owner) {
          throw denied("You can only make another member owner if you're this organization's owner.");
        }
        if (level > org.level) throw denied('You can only change access level of others to lower or equal to your current one.');
        checkMayEditOther(org.level, target.level);
        await setMemberLevel(db, target.id, level);
        return (await findMemberByUserId(db, org.id, target.user_id))!;
      });
      return { status: 200, body: memberJson(member) };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: `${base}:user__uuid/`,
    scope: 'organization_member:write',
    operationId: 'members_destroy',
    summary: 'Remove a member (admins remove others at or below their level; anyone may leave; the last owner may not)',
    tag,
    params: memberPath,
    response: { status: 204, description: 'Removed' },
    errors: [403],
    async handler({ principal, params, services }) {
      await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.organization_id, { lock: true });
        const target = await targetOr404(db, org, principal, params.user__uuid);
        if (target.user_id !== principal.userId) checkMayEditOther(org.level, target.level);
        if (target.level === LEVEL.owner && (await countOwners(db, org.id)) <= 1) {
          throw apiError('validation_error', 'Cannot leave the organization as its only owner!');
        }
        await deleteMember(db, target.id);
      });
      return { status: 204 };
    },
  }),
];
