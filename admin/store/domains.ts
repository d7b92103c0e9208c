// Verified domains of an organization (for SSO): unique across all organizations.
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';

export interface DomainRow {
  id: string;
  organization_id: string;
  domain: string;
  verification_challenge: string;
  verified_at: Date | null;
  jit_provisioning_enabled: boolean;
  sso_enforcement: string;
  saml_entity_id: string;
  saml_acs_url: string;
  saml_x509_cert: string;
}

export interface DomainJson {
  id: string;
  domain: string;
  is_verified: boolean;
  verified_at: string | null;
  verification_challenge: string;
  jit_provisioning_enabled: boolean;
  sso_enforcement: string;
  has_saml: boolean;
  saml_entity_id: string;
  saml_acs_url: string;
  saml_x509_cert: string;
}

export function domainJson(d: DomainRow): DomainJson {
  return {
    id: d.id,
    domain: d.domain,
    is_verified: d.verified_at !== null,
    verified_at: d.verified_at?.toISOString() ?? null,
    verification_challenge: d.verification_challenge,
    jit_provisioning_enabled: d.jit_provisioning_enabled,
    sso_enforcement: d.sso_enforcement,
    has_saml: d.saml_entity_id !== '' && d.saml_acs_url !== '' && d.saml_x509_cert !== '',
    saml_entity_id: d.saml_entity_id,
    saml_acs_url: d.saml_acs_url,
    saml_x509_cert: d.saml_x509_cert,
  };
}

const COLUMNS = `id, organization_id, domain, verification_challenge, verified_at, jit_provisioning_enabled,
  sso_enforcement, saml_entity_id, saml_acs_url, saml_x509_cert`;

/** 32 random bytes, URL-safe base64 without padding (43 characters). */
export function newVerificationChallenge(): string {
  return randomBytes(32).toString('base64url');
}

export async function listDomains(
  db: Queryable,
  organizationId: string,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: DomainRow[] }> {
  const count = await db.query<{ count: string }>('select count(*) from organization_domains where organization_id = $1', [organizationId]);
  const { rows } = await db.query<DomainRow>(
    `select ${COLUMNS} from organization_domains where organization_id = $1 order by domain, id limit $2 offset $3`,
    [organizationId, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows };
}

export async function findDomain(db: Queryable, organizationId: string, id: string, lock = false): Promise<DomainRow | undefined> {
  const { rows } = await db.query<DomainRow>(
    `select ${COLUMNS} from organization_domains where organization_id = $1 and id = $2 ${lock ? 'for update' : ''}`,
    [organizationId, id],
  );
  return rows[0];
}

export interface DomainFields {
  jit_provisioning_enabled?: boolean;
  sso_enforcement?: string;
  saml_entity_id?: string;
  saml_acs_url?: string;
  saml_x509_cert?: string;
}

/** Throws PostgreSQL's unique violation (constraint organization_domains_domain_key) for a taken domain. */
export async function createDomain(db: Queryable, organizationId: string, domain: string, fields: DomainFields): Promise<DomainRow> {
  const { rows } = await db.query<DomainRow>(
    `insert into organization_domains (organization_id, domain, verification_challenge, saml_entity_id, saml_acs_url, saml_x509_cert)
     values ($1, $2, $3, coalesce($4, ''), coalesce($5, ''), coalesce($6, '')) returning ${COLUMNS}`,
    [organizationId, domain, newVerificationChallenge(), fields.saml_entity_id ?? null, fields.saml_acs_url ?? null, fields.saml_x509_cert ?? null],
  );
  return rows[0]!;
}

const UPDATABLE = ['jit_provisioning_enabled', 'sso_enforcement', 'saml_entity_id', 'saml_acs_url', 'saml_x509_cert'] as const;

export async function updateDomain(db: Queryable, id: string, fields: DomainFields): Promise<DomainRow> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const column of UPDATABLE) {
    if (fields[column] === undefined) continue;
    values.push(fields[column]);
    sets.push(`${column} = $${values.length}`);
  }
  const { rows } = await db.query<DomainRow>(
    `update organization_domains set ${sets.length > 0 ? sets.join(', ') : 'id = id'} where id = $1 returning ${COLUMNS}`,
    values,
  );
  return rows[0]!;
}

export async function markDomainVerified(db: Queryable, id: string): Promise<void> {
  await db.query('update organization_domains set verified_at = now() where id = $1 and verified_at is null', [id]);
}

export async function markVerificationRetry(db: Queryable, id: string): Promise<void> {
  await db.query('update organization_domains set last_verification_retry = now() where id = $1', [id]);
}

export async function deleteDomain(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query('delete from organization_domains where organization_id = $1 and id = $2', [organizationId, id]);
  return rowCount === 1;
}
