// Limit/offset pagination as Django REST framework's LimitOffsetPagination does it (PostHog's
// default): limit defaults to 100 and falls back to it when missing, non-numeric or not
// positive; a bad or negative offset is 0; next/previous are absolute URLs of the request with
// limit and offset replaced (query parameters sorted by name, as DRF re-encodes them).
export interface Page {
  limit: number;
  offset: number;
}

export interface Paginated<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

export const DEFAULT_LIMIT = 100;
/** Most results one page holds (a larger `limit` means this). */
export const MAX_LIMIT = 1_000;

function parseInteger(value: unknown): number | undefined {
  const text: unknown = Array.isArray(value) ? (value as unknown[]).at(-1) : value;
  if (typeof text !== 'string' || !/^\s*[+-]?\d+\s*$/.test(text)) return undefined;
  // Beyond 2^53 precision is gone anyway, and PostgreSQL takes anything up to 2^63.
  return Math.min(Number(text), Number.MAX_SAFE_INTEGER);
}

export function pageOf(query: Record<string, unknown>): Page {
  const limit = parseInteger(query.limit);
  const offset = parseInteger(query.offset);
  return {
    limit: limit !== undefined && limit > 0 ? Math.min(limit, MAX_LIMIT) : DEFAULT_LIMIT,
    offset: offset !== undefined && offset >= 0 ? offset : 0,
  };
}

function withParams(url: URL, set: Record<string, number>, remove: readonly string[] = []): string {
  const out = new URL(url.href);
  for (const [k, v] of Object.entries(set)) out.searchParams.set(k, String(v));
  for (const k of remove) out.searchParams.delete(k);
  out.searchParams.sort();
  return out.href;
}

export function paginate<T>(url: URL, page: Page, count: number, results: T[]): Paginated<T> {
  const { limit, offset } = page;
  const next = offset + limit >= count ? null : withParams(url, { limit, offset: offset + limit });
  let previous: string | null = null;
  if (offset > 0) {
    previous = offset - limit <= 0 ? withParams(url, { limit }, ['offset']) : withParams(url, { limit, offset: offset - limit });
  }
  return { count, next, previous, results };
}
