// /api/organizations/:organization_id/invites/: invitations to join an organization.
import type { z } from 'zod';
import { ApiError } from '../../lib/index.js';
import { inTransaction, type Queryable } from '../db/pool.js';
import { apiError, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute, type Principal } from '../http/route.js';
import { normalizeEmail, validate } from '../http/validation.js';
import type { Services } from '../services.js';
import {
  inviteBulkCreate,
  inviteCreate,
  inviteSchema,
  MAX_BULK_INVITES,
  organizationChildPath,
  organizationItemPath,
  paginatedInvites,
} from '../schemas.js';
import { deleteInvite, inviteJson, invitesForEmail, listInvites, replaceInvite, type InviteRow, type ProjectAccess } from '../store/invites.js';
import { findMemberByUserId } from '../store/members.js';
import type { OrganizationAccess } from '../store/organizations.js';
import { InviteEmailsThrottled, reserveInviteEmails } from '../store/invite-emails.js';
import { organizationOr404 } from './common.js';
import { findUserByEmail } from '../store/users.js';

const tag = 'invites';
const base = '/api/organizations/:organization_id/invites/';

type InviteInput = z.output<typeof inviteCreate>;

const ACCESS_RANK: Record<ProjectAccess['level'], number> = { none: 0, member: 1, admin: 2 };

/** Checks one invite against the organization and stores it, replacing earlier ones for the address. */
async function createInvite(
  db: Queryable,
  services: Services,
  principal: Principal,
  org: OrganizationAccess,
  input: InviteInput,
  attrPrefix: string,
): Promise<InviteRow> {
  const targetEmail = normalizeEmail(input.target_email);
  let level: number = input.level ?? 1;
  if (level > org.level) throw apiError('permission_denied', 'You cannot invite a user with a higher permission level than your own.');
  const existingUser = await findUserByEmail(db, targetEmail);
  if (existingUser && (await findMemberByUserId(db, org.id, existingUser.id))) {
    throw apiError('validation_error', 'A user with this email address already belongs to the organization.', `${attrPrefix}target_email`);
  }
  let access = input.private_project_access ?? [];
  if (access.length > 0) {
    const { rows } = await db.query<{ id: number }>('select id from projects where organization_id = $1 and id = any($2::int[])', [
      org.id,
      access.map((a) => a.id).filter((id) => id >= 1 && id <= 2_147_483_647),
    ]);
    const known = new Set(rows.map((r) => r.id));
    if (access.some((a) => !known.has(a.id))) {
      throw apiError('validation_error', 'Project does not exist on this organization.', `${attrPrefix}private_project_access`);
    }
  }
  if (input.combine_pending_invites) {
    const pending = (await invitesForEmail(db, org.id, targetEmail)).filter(
      (i) => i.created_at.getTime() >= Date.now() - services.config.inviteValidity,
    );
    const merged = new Map<number, ProjectAccess>();
    for (const a of [...pending.flatMap((i) => i.private_project_access), ...access]) {
      const seen = merged.get(a.id);
      if (!seen || ACCESS_RANK[a.level] > ACCESS_RANK[seen.level]) merged.set(a.id, a);
    }
    access = [...merged.values()];
    level = Math.max(level, ...pending.map((i) => i.level));
  }
  return replaceInvite(db, org.id, principal.userId, {
    target_email: targetEmail,
    first_name: input.first_name ?? '',
    level,
    message: input.message ?? null,
    private_project_access: access,
    emailing_attempt_made: services.inviteMailer !== undefined && (input.send_email ?? true),
  });
}

/**
 * Records the emails these invites will send against the rate limits, or refuses the request
 * with 429 (PostHog's throttled answer, DRF's wording) and a Retry-After: the transaction then
 * rolls back and no invite is made.
 */
async function reserveEmails(db: Queryable, services: Services, org: OrganizationAccess, invites: readonly InviteRow[]): Promise<void> {
  const { inviteEmailsPerOrganization, inviteEmailsPerAddress, inviteEmailWindow } = services.config;
  const addresses = invites.filter((i) => i.emailing_attempt_made).map((i) => i.target_email);
  try {
    await reserveInviteEmails(db, org.id, addresses, { perOrganization: inviteEmailsPerOrganization, perAddress: inviteEmailsPerAddress, windowMs: inviteEmailWindow });
  } catch (err) {
    if (!(err instanceof InviteEmailsThrottled)) throw err;
    const seconds = err.retryAfterSeconds;
    throw new ApiError('throttled', `Request was throttled. Expected available in ${seconds} second${seconds === 1 ? '' : 's'}.`, {
      attr: null,
      headers: { 'retry-after': String(seconds) },
    });
  }
}

/** Emails invites that asked for it, after they are committed; never fails the request. */
function emailInvites(services: Services, org: OrganizationAccess, invites: readonly InviteRow[]): void {
  const mailer = services.inviteMailer;
  if (!mailer) return;
  for (const invite of invites) {
    if (!invite.emailing_attempt_made) continue;
    const inviter = invite.created_by;
    const inviterName = [inviter?.first_name, inviter?.last_name].filter(Boolean).join(' ') || inviter?.email || 'Someone';
    void mailer.send({
      to: invite.target_email,
      firstName: invite.first_name,
      organizationName: org.name,
      inviterName,
      inviterEmail: inviter?.email ?? null,
      message: invite.message,
      inviteId: invite.id,
      expiresAt: new Date(invite.created_at.getTime() + services.config.inviteValidity),
    });
  }
}

export const inviteRoutes = [
  defineRoute({
    method: 'GET',
    path: base,
    scope: 'organization_member:read',
    operationId: 'invites_list',
    summary: "List an organization's invites, newest first (expired ones included, with is_expired)",
    tag,
    params: organizationChildPath,
    paginated: true,
    response: { status: 200, description: 'A page of invites', schema: paginatedInvites },
    async handler({ principal, params, query, url, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const page = pageOf(query);
      const { count, rows } = await listInvites(services.pool, org.id, page);
      const now = Date.now();
      return { status: 200, body: paginate(url, page, count, rows.map((i) => inviteJson(i, services.config.inviteValidity, now))) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: base,
    scope: 'organization_member:write',
    operationId: 'invites_create',
    summary: 'Invite an email address (replaces earlier invites of the same address)',
    tag,
    params: organizationChildPath,
    requestBody: inviteCreate,
    response: { status: 201, description: 'The new invite', schema: inviteSchema },
    errors: [403, 429],
    async handler({ principal, params, body, services }) {
      const { org, invite } = await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.organization_id, { lock: true });
        const invite = await createInvite(db, services, principal, org, body(inviteCreate), '');
        await reserveEmails(db, services, org, [invite]);
        return { org, invite };
      });
      emailInvites(services, org, [invite]);
      return { status: 201, body: inviteJson(invite, services.config.inviteValidity) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: `${base}bulk/`,
    scope: 'organization_member:write',
    operationId: 'invites_bulk_create',
    summary: `Invite up to ${MAX_BULK_INVITES} addresses at once: all are created, or none (empty body on success)`,
    tag,
    params: organizationChildPath,
    requestBody: inviteBulkCreate,
    response: { status: 200, description: 'All invites created (empty body)' },
    errors: [403, 429],
    async handler({ principal, params, rawBody, services }) {
      const { org, invites } = await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.organization_id, { lock: true });
        if (!Array.isArray(rawBody)) throw apiError('validation_error', 'This endpoint needs an array of data for bulk invite creation.');
        if (rawBody.length > MAX_BULK_INVITES) {
          throw apiError('max_length', `A maximum of ${MAX_BULK_INVITES} invites can be sent in a single request.`);
        }
        const inputs = rawBody.map((item, i) => validate(inviteCreate, item, [i]));
        const invites: InviteRow[] = [];
        for (const [i, input] of inputs.entries()) invites.push(await createInvite(db, services, principal, org, input, `${i}__`));
        // A later item for the same address replaced an earlier one: email only survivors.
        const survivors = [...new Map(invites.map((inv) => [inv.target_email.toLowerCase(), inv])).values()];
        await reserveEmails(db, services, org, survivors);
        return { org, invites: survivors };
      });
      emailInvites(services, org, invites);
      return { status: 200 };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: `${base}:id/`,
    scope: 'organization_member:write',
    operationId: 'invites_destroy',
    summary: 'Cancel an invite',
    tag,
    params: organizationItemPath,
    response: { status: 204, description: 'Deleted' },
    async handler({ principal, params, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      if (!(await deleteInvite(services.pool, org.id, params.id))) throw notFound();
      return { status: 204 };
    },
  }),
];
