// Request and response shapes of the API, as zod schemas. Requests are validated with them and
// the OpenAPI document (GET /api/schema/) is generated from them, so the two cannot drift.
// Every schema with an `id` becomes a component of that document.
import { z } from 'zod';
import { email, membershipLevel, text } from './http/validation.js';

export const apiSchemas = z.registry<{ id: string; description?: string }>();

const datetime = () => z.string().meta({ format: 'date-time' });
const uuid = () => z.guid();

// --- path parameters ---------------------------------------------------------------------------

/** An organization id, or `@current` (the earliest organization the key's user joined). */
const organizationRef = () => z.union([z.guid(), z.literal('@current')]);

export const organizationPath = z.object({ id: organizationRef() });
export const organizationChildPath = z.object({ organization_id: organizationRef() });
export const organizationItemPath = z.object({ organization_id: organizationRef(), id: z.guid() });
export const memberPath = z.object({ organization_id: organizationRef(), user__uuid: z.union([z.guid(), z.literal('@me')]) });
/** A positive 32-bit integer id in a path (project, plugin, plugin config). */
export const integerId = () =>
  z
    .string()
    .regex(/^\d{1,10}$/)
    .transform(Number)
    .refine((n) => n >= 1 && n <= 2_147_483_647);

export const projectPath = z.object({ id: integerId() });

// --- shared response pieces ----------------------------------------------------------------------

export const userSchema = z
  .object({
    id: z.int(),
    uuid: uuid(),
    distinct_id: z.string(),
    first_name: z.string(),
    last_name: z.string(),
    email: z.email(),
    is_email_verified: z.boolean(),
    hedgehog_config: z.record(z.string(), z.unknown()).nullable(),
  })
  .register(apiSchemas, { id: 'User' });

export function paginated<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      count: z.int(),
      next: z.url().nullable().meta({ description: 'URL of the next page (same limit), null on the last page' }),
      previous: z.url().nullable().meta({ description: 'URL of the previous page, null on the first page' }),
      results: z.array(item),
    })
    .register(apiSchemas, { id });
}

// --- organizations -------------------------------------------------------------------------------

export const organizationSchema = z
  .object({
    id: uuid(),
    name: z.string(),
    slug: z.string(),
    logo_media_id: uuid().nullable(),
    created_at: datetime(),
    updated_at: datetime(),
    membership_level: z.literal([1, 8, 15]).nullable().meta({ description: "The caller's level: 1 member, 8 admin, 15 owner" }),
    plugins_access_level: z.int(),
    teams: z.array(z.record(z.string(), z.unknown())).meta({ description: 'Projects of the organization' }),
    available_product_features: z.array(z.unknown()),
    is_member_join_email_enabled: z.boolean(),
    metadata: z.string().nullable(),
    customer_id: z.string().nullable(),
    enforce_2fa: z.boolean().nullable(),
    member_count: z.string().meta({ description: 'Number of members (a decimal string, as the interface specifies)' }),
  })
  .register(apiSchemas, { id: 'Organization' });

export const paginatedOrganizations = paginated(organizationSchema, 'PaginatedOrganizationList');

const organizationFields = {
  name: text(64).min(1),
  logo_media_id: uuid().nullable(),
  is_member_join_email_enabled: z.boolean(),
  enforce_2fa: z.boolean().nullable(),
};

export const organizationCreate = z
  .object({
    name: organizationFields.name,
    logo_media_id: organizationFields.logo_media_id.optional(),
    is_member_join_email_enabled: organizationFields.is_member_join_email_enabled.optional(),
    enforce_2fa: organizationFields.enforce_2fa.optional(),
  })
  .register(apiSchemas, { id: 'OrganizationCreate' });

export const organizationUpdate = z.object(organizationFields).partial().register(apiSchemas, { id: 'PatchedOrganization' });

// --- domains -------------------------------------------------------------------------------------

export const DOMAIN_PATTERN = /^([a-z0-9]+(-[a-z0-9]+)*\.)+[a-z]{2,}$/;

export const domainSchema = z
  .object({
    id: uuid(),
    domain: z.string(),
    is_verified: z.boolean(),
    verified_at: datetime().nullable(),
    verification_challenge: z.string().meta({
      description: 'Publish it as a TXT record at _spate-challenge.<domain>, then POST …/verify/',
    }),
    jit_provisioning_enabled: z.boolean(),
    sso_enforcement: z.string(),
    has_saml: z.boolean(),
    saml_entity_id: z.string(),
    saml_acs_url: z.string(),
    saml_x509_cert: z.string(),
  })
  .register(apiSchemas, { id: 'Domain' });

export const paginatedDomains = paginated(domainSchema, 'PaginatedDomainList');

const domainSettableFields = {
  jit_provisioning_enabled: z.boolean().meta({ description: 'Only once the domain is verified' }),
  sso_enforcement: text(28).meta({ description: 'Only once the domain is verified; empty = off' }),
  saml_entity_id: text(512),
  saml_acs_url: text(512),
  saml_x509_cert: text(),
};

export const domainCreate = z
  .object({
    domain: text(128).regex(DOMAIN_PATTERN, { message: 'Please enter a valid domain or subdomain name.' }),
    ...domainSettableFields,
  })
  .partial({ jit_provisioning_enabled: true, sso_enforcement: true, saml_entity_id: true, saml_acs_url: true, saml_x509_cert: true })
  .register(apiSchemas, { id: 'DomainCreate' });

export const domainUpdate = z
  .object(domainSettableFields)
  .partial()
  .meta({ description: 'The domain itself cannot change after creation (a domain field is ignored).' })
  .register(apiSchemas, { id: 'PatchedDomain' });

// --- invites -------------------------------------------------------------------------------------

export const projectAccessSchema = z.object({
  id: z.int().meta({ description: 'Project id' }),
  level: z.enum(['none', 'member', 'admin']),
});

export const inviteSchema = z
  .object({
    id: uuid(),
    target_email: z.email(),
    first_name: z.string(),
    emailing_attempt_made: z.boolean(),
    level: z.literal([1, 8, 15]),
    is_expired: z.boolean(),
    created_by: userSchema.nullable(),
    created_at: datetime(),
    updated_at: datetime(),
    message: z.string().nullable(),
    private_project_access: z.array(projectAccessSchema),
  })
  .register(apiSchemas, { id: 'OrganizationInvite' });

export const paginatedInvites = paginated(inviteSchema, 'PaginatedOrganizationInviteList');

export const inviteCreate = z
  .object({
    target_email: email(),
    first_name: text(30).optional(),
    level: membershipLevel().optional().meta({ description: '1 member (default), 8 admin, 15 owner' }),
    message: text().nullable().optional(),
    private_project_access: z.array(projectAccessSchema).optional(),
    send_email: z.boolean().optional().meta({ description: 'Default true; emails go out only if SMTP is configured' }),
    combine_pending_invites: z
      .boolean()
      .optional()
      .meta({ description: 'Keep the highest level and all project access of pending invites for this address' }),
  })
  .register(apiSchemas, { id: 'OrganizationInviteCreate' });

export const MAX_BULK_INVITES = 20;

export const inviteBulkCreate = z
  .array(inviteCreate)
  .meta({ description: `At most ${MAX_BULK_INVITES} invites; all are created or none` })
  .register(apiSchemas, { id: 'OrganizationInviteBulkCreate' });

// --- members -------------------------------------------------------------------------------------

export const memberSchema = z
  .object({
    id: uuid(),
    user: userSchema,
    level: z.literal([1, 8, 15]),
    joined_at: datetime(),
    updated_at: datetime(),
    is_2fa_enabled: z.boolean(),
    has_social_auth: z.boolean(),
  })
  .register(apiSchemas, { id: 'OrganizationMember' });

export const paginatedMembers = paginated(memberSchema, 'PaginatedOrganizationMemberList');

export const memberUpdate = z.object({ level: membershipLevel() }).register(apiSchemas, { id: 'PatchedOrganizationMember' });

// --- projects ------------------------------------------------------------------------------------

const PER_NODE = 'enforced by each ingest node on its own (N nodes accept up to N times as much)';
const limitDescriptions = {
  capture_events_per_second: `Realtime events per second the project may send, ${PER_NODE}; past it capture answers 429 with Retry-After. null: the cluster default (PROJECT_EVENTS_PER_SECOND), which is also the most it may be set to`,
  capture_events_per_day: `Events per UTC day, ${PER_NODE}; past it capture drops the project's events and still answers 200 (PostHog's quota answer). null: the cluster default (PROJECT_EVENTS_PER_DAY), also the most it may be set to`,
  historical_messages_per_second: `HISTORICAL messages per second (one per shard of a historical request), ${PER_NODE}; past it capture answers 429 with Retry-After. null: the cluster default (PROJECT_HISTORICAL_MESSAGES_PER_SECOND), also the most it may be set to`,
};
/** A limit as stored: a positive 32-bit count, or null for the cluster default. */
const limitValue = (description: string) => z.int().min(1).max(2_147_483_647).nullable().meta({ description });
const projectLimitFields = {
  capture_events_per_second: limitValue(limitDescriptions.capture_events_per_second),
  capture_events_per_day: limitValue(limitDescriptions.capture_events_per_day),
  historical_messages_per_second: limitValue(limitDescriptions.historical_messages_per_second),
};

export const projectSchema = z
  .object({
    id: z.int(),
    uuid: uuid(),
    organization: uuid(),
    name: z.string(),
    api_token: z.string().meta({ description: 'Project API key (phc_…): what SDKs send as api_key' }),
    created_at: datetime(),
    updated_at: datetime(),
    ...projectLimitFields,
  })
  .register(apiSchemas, { id: 'Project' });

export const paginatedProjects = paginated(projectSchema, 'PaginatedProjectList');

export const projectCreate = z
  .object({
    name: text(200).min(1),
    capture_events_per_second: projectLimitFields.capture_events_per_second.optional(),
    capture_events_per_day: projectLimitFields.capture_events_per_day.optional(),
    historical_messages_per_second: projectLimitFields.historical_messages_per_second.optional(),
  })
  .register(apiSchemas, { id: 'ProjectCreate' });
export const projectUpdate = projectCreate.partial().register(apiSchemas, { id: 'PatchedProject' });

// --- errors --------------------------------------------------------------------------------------

export const errorSchema = z
  .object({
    type: z.enum(['validation_error', 'authentication_error', 'invalid_request', 'throttled_error', 'server_error']),
    code: z.string(),
    detail: z.string(),
    attr: z.string().nullable().meta({ description: 'The offending field, path parts joined by "__"; null if none' }),
  })
  .register(apiSchemas, { id: 'Error' });
