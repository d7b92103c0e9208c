// Who is calling: a personal API key from (in this order, first found wins, as PostHog does)
// the `Authorization: Bearer` header, the body field `personal_api_key`, or the query parameter.
import type { Logger } from '../../lib/index.js';
import { hasScope, type Scope } from '../auth/scopes.js';
import type { Pool } from '../db/pool.js';
import { apiError } from '../errors.js';
import { findKeyByValue, touchKey } from '../store/keys.js';
import type { Principal } from './route.js';

const BEARER = /^Bearer\s+(\S.*)$/;

/** The body field and query parameter that may carry a personal API key. */
export const API_KEY_FIELD = 'personal_api_key';

interface FoundKey {
  key: string;
  source: 'Authorization header' | 'body' | 'query string';
}

export function findPersonalApiKey(
  authorization: string | undefined,
  body: unknown,
  query: Record<string, unknown>,
): FoundKey | undefined {
  const bearer = authorization ? BEARER.exec(authorization) : null;
  // `pha_` tokens are OAuth access tokens in PostHog, never personal keys.
  if (bearer && !bearer[1]!.startsWith('pha_')) return { key: bearer[1]!.trim(), source: 'Authorization header' };
  if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
    const value = (body as Record<string, unknown>)[API_KEY_FIELD];
    if (typeof value === 'string' && value !== '') return { key: value, source: 'body' };
  }
  const fromQuery = query[API_KEY_FIELD];
  if (typeof fromQuery === 'string' && fromQuery !== '') return { key: fromQuery, source: 'query string' };
  return undefined;
}

export async function authenticate(
  pool: Pool,
  log: Logger,
  request: { authorization: string | undefined; body: unknown; query: Record<string, unknown> },
): Promise<Principal> {
  const found = findPersonalApiKey(request.authorization, request.body, request.query);
  if (!found) throw apiError('not_authenticated');
  const key = await findKeyByValue(pool, found.key);
  if (!key) throw apiError('authentication_failed', `Personal API key found in request ${found.source} is invalid.`);
  if (!key.last_used_at || Date.now() - key.last_used_at.getTime() > 3_600_000) {
    touchKey(pool, key.key_id).catch((err: unknown) => log.warn({ err }, 'could not record personal API key use'));
  }
  return {
    userId: key.user_id,
    userUuid: key.user_uuid,
    keyId: key.key_id,
    scopes: key.scopes,
    scopedOrganizations: key.scoped_organizations && key.scoped_organizations.length > 0 ? key.scoped_organizations : null,
  };
}

export function requireScope(principal: Principal, scope: Scope): void {
  if (!hasScope(principal.scopes, scope)) throw apiError('permission_denied', `API key missing required scope '${scope}'`);
}
