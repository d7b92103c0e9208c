// Organization slugs as PostHog derives them: Django's slugify(name) cut to 48 characters;
// on a collision, the first 43 characters plus "-" and 4 random letters.
import { randomInt } from 'node:crypto';

export const MAX_SLUG_LENGTH = 48;
const FALLBACK = 'organization';
const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** ASCII-only, lowercase, words joined by "-" (accents folded, other characters dropped). */
export function slugify(name: string): string {
  const slug = name
    .normalize('NFKD')
    .replace(/[^\x00-\x7F]/g, '')
    .toLowerCase()
    .replace(/[^\w\s-]/g, '')
    .replace(/[-\s]+/g, '-')
    .replace(/^[-_]+|[-_]+$/g, '')
    .slice(0, MAX_SLUG_LENGTH);
  return slug === '' ? FALLBACK : slug;
}

function randomLetters(n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) out += LETTERS[randomInt(LETTERS.length)];
  return out;
}

/** The slug to try on attempt `n` (0 = the plain slug). Later attempts add longer suffixes. */
export function slugCandidate(base: string, attempt: number): string {
  if (attempt === 0) return base;
  const suffix = randomLetters(attempt <= 10 ? 4 : 12);
  return `${base.slice(0, MAX_SLUG_LENGTH - suffix.length - 1)}-${suffix}`;
}
