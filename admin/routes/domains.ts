// /api/organizations/:organization_id/domains/: domains an organization proves it owns.
import { inTransaction, pgConstraint, pgErrorCode, PG_FOREIGN_KEY_VIOLATION, PG_UNIQUE_VIOLATION } from '../db/pool.js';
import { apiError, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute } from '../http/route.js';
import { domainCreate, domainSchema, domainUpdate, organizationChildPath, organizationItemPath, paginatedDomains } from '../schemas.js';
import {
  createDomain,
  deleteDomain,
  domainJson,
  findDomain,
  listDomains,
  markDomainVerified,
  markVerificationRetry,
  updateDomain,
} from '../store/domains.js';
import { LEVEL } from '../store/organizations.js';
import { organizationOr404 } from './common.js';

const tag = 'domains';
const base = '/api/organizations/:organization_id/domains/';

/** Settable only on a verified domain (they decide who may sign in through it). */
const VERIFIED_ONLY = ['jit_provisioning_enabled', 'sso_enforcement'] as const;

export const domainRoutes = [
  defineRoute({
    method: 'GET',
    path: base,
    scope: 'organization:read',
    operationId: 'domains_list',
    summary: "List an organization's domains (ordered by domain)",
    tag,
    params: organizationChildPath,
    paginated: true,
    response: { status: 200, description: 'A page of domains', schema: paginatedDomains },
    async handler({ principal, params, query, url, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const page = pageOf(query);
      const { count, rows } = await listDomains(services.pool, org.id, page);
      return { status: 200, body: paginate(url, page, count, rows.map(domainJson)) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: base,
    scope: 'organization:write',
    operationId: 'domains_create',
    summary: 'Add a domain (admins and owners); jit_provisioning_enabled and sso_enforcement are ignored until it is verified',
    tag,
    params: organizationChildPath,
    requestBody: domainCreate,
    response: { status: 201, description: 'The new domain with its verification challenge', schema: domainSchema },
    errors: [403],
    async handler({ principal, params, body, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id, { minLevel: LEVEL.admin });
      const { domain, jit_provisioning_enabled: _jit, sso_enforcement: _sso, ...saml } = body(domainCreate);
      try {
        return { status: 201, body: domainJson(await createDomain(services.pool, org.id, domain, saml)) };
      } catch (err) {
        if (pgErrorCode(err) === PG_UNIQUE_VIOLATION && pgConstraint(err) === 'organization_domains_domain_key') {
          throw apiError('unique', 'domain with this domain already exists.', 'domain');
        }
        // The organization was deleted meanwhile.
        if (pgErrorCode(err) === PG_FOREIGN_KEY_VIOLATION) throw notFound();
        throw err;
      }
    },
  }),

  defineRoute({
    method: 'GET',
    path: `${base}:id/`,
    scope: 'organization:read',
    operationId: 'domains_retrieve',
    summary: 'Retrieve a domain',
    tag,
    params: organizationItemPath,
    response: { status: 200, description: 'The domain', schema: domainSchema },
    async handler({ principal, params, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const domain = await findDomain(services.pool, org.id, params.id);
      if (!domain) throw notFound();
      return { status: 200, body: domainJson(domain) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: `${base}:id/`,
    scope: 'organization:write',
    operationId: 'domains_partial_update',
    summary: 'Update SSO/SAML settings of a domain (admins and owners)',
    tag,
    params: organizationItemPath,
    requestBody: domainUpdate,
    response: { status: 200, description: 'The updated domain', schema: domainSchema },
    errors: [403],
    async handler({ principal, params, body, services }) {
      const updated = await inTransaction(services.pool, async (db) => {
        const org = await organizationOr404(db, principal, params.organization_id, { minLevel: LEVEL.admin });
        const domain = await findDomain(db, org.id, params.id, true);
        if (!domain) throw notFound();
        const fields = body(domainUpdate);
        if (domain.verified_at === null) {
          const refused = VERIFIED_ONLY.find((f) => fields[f] !== undefined);
          if (refused) throw apiError('verification_required', undefined, refused);
        }
        return updateDomain(db, domain.id, fields);
      });
      return { status: 200, body: domainJson(updated) };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: `${base}:id/`,
    scope: 'organization:write',
    operationId: 'domains_destroy',
    summary: 'Remove a domain (admins and owners)',
    tag,
    params: organizationItemPath,
    response: { status: 204, description: 'Deleted' },
    errors: [403],
    async handler({ principal, params, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id, { minLevel: LEVEL.admin });
      if (!(await deleteDomain(services.pool, org.id, params.id))) throw notFound();
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'POST',
    path: `${base}:id/verify/`,
    scope: 'organization:write',
    operationId: 'domains_verify',
    summary:
      'Check the TXT record _spate-challenge.<domain> against the verification challenge; marks the domain verified on a match (admins and owners). ' +
      'Answers 200 with an empty body either way: read the domain to see is_verified.',
    tag,
    params: organizationItemPath,
    response: { status: 200, description: 'Checked (empty body)' },
    errors: [403, 503],
    async handler({ principal, params, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id, { minLevel: LEVEL.admin });
      const domain = await findDomain(services.pool, org.id, params.id);
      if (!domain) throw notFound();
      if (domain.verified_at !== null) throw apiError('already_verified');
      const matched = await services.domainVerifier.verify(domain.domain, domain.verification_challenge);
      if (matched) await markDomainVerified(services.pool, domain.id);
      else await markVerificationRetry(services.pool, domain.id);
      services.log.info({ domain: domain.domain, organization: org.id, matched }, 'domain verification checked');
      return { status: 200 };
    },
  }),
];
