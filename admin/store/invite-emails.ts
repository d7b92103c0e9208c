// Rate limits of invite emails: an organization may send `perOrganization` and an address may
// receive `perAddress` (from every organization together) within `windowMs`. Invites are
// emailed by the admin's SMTP server, so without limits one key could make it send mail to
// anyone, as often as it liked. Counted in PostgreSQL, so every admin replica sees the same.
import type { Queryable } from '../db/pool.js';

export interface InviteEmailLimits {
  perOrganization: number;
  perAddress: number;
  windowMs: number;
}

/** Over a limit: how long until the emails asked for fit (whole seconds, at least 1). */
export class InviteEmailsThrottled extends Error {
  override name = 'InviteEmailsThrottled';
  constructor(readonly retryAfterSeconds: number) {
    super(`invite emails throttled for ${retryAfterSeconds} s`);
  }
}

/** Advisory lock namespace of addresses (the second key is the address's hash). */
const ADDRESS_LOCK_SPACE = 5_370_617;

/**
 * Records emails to `addresses` (each at most once) from the organization, or throws
 * InviteEmailsThrottled and records nothing. Call inside the transaction that creates the
 * invites, with the organization's row locked (so its count cannot race).
 */
export async function reserveInviteEmails(db: Queryable, organizationId: string, addresses: readonly string[], limits: InviteEmailLimits): Promise<void> {
  const wanted = [...new Set(addresses.map((a) => a.toLowerCase()))].sort();
  if (wanted.length === 0) return;
  // Addresses span organizations: lock each (in one order, so two requests cannot deadlock).
  for (const address of wanted) await db.query('select pg_advisory_xact_lock($1, hashtext($2))', [ADDRESS_LOCK_SPACE, address]);
  const window = `${limits.windowMs} milliseconds`;
  await db.query('delete from invite_emails where sent_at < clock_timestamp() - $1::interval', [window]);

  // Seconds until the k-th oldest send in the window leaves it (k ≥ 1), given the sends' ages.
  const wait = async (where: string, value: string, k: number): Promise<number> => {
    const { rows } = await db.query<{ ms: number | null }>(
      `select extract(epoch from (sent_at + $3::interval - clock_timestamp())) * 1000 as ms from invite_emails
       where ${where} = $1 order by sent_at offset $2 limit 1`,
      [value, k - 1, window],
    );
    const ms = rows[0]?.ms ?? limits.windowMs;
    return Math.max(1, Math.ceil(ms / 1000));
  };

  const sent = await db.query<{ n: number }>('select count(*)::int as n from invite_emails where organization_id = $1', [organizationId]);
  const over = sent.rows[0]!.n + wanted.length - limits.perOrganization;
  if (over > 0) {
    // More than the limit in one request can never fit: come back after a whole window.
    throw new InviteEmailsThrottled(wanted.length > limits.perOrganization ? Math.ceil(limits.windowMs / 1000) : await wait('organization_id', organizationId, over));
  }
  const counts = await db.query<{ address: string; n: number }>(
    'select address, count(*)::int as n from invite_emails where address = any($1::text[]) group by address',
    [wanted],
  );
  let retryAfter = 0;
  for (const { address, n } of counts.rows) {
    if (n + 1 > limits.perAddress) retryAfter = Math.max(retryAfter, await wait('address', address, n + 1 - limits.perAddress));
  }
  if (retryAfter > 0) throw new InviteEmailsThrottled(retryAfter);
  await db.query('insert into invite_emails (organization_id, address) select $1, unnest($2::text[])', [organizationId, wanted]);
}
