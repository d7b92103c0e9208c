import { describe, expect, it } from 'vitest';
import { MAX_SLUG_LENGTH, slugCandidate, slugify } from './slug.js';

describe('slug', () => {
  it('slug - follows Django slugify: ASCII, lowercase, hyphens, accents folded', () => {
    expect(slugify('Acme Corp')).toBe('acme-corp');
    expect(slugify('  Café  Crème -- Ltd. ')).toBe('cafe-creme-ltd');
    expect(slugify("Robert'); DROP TABLE organizations;--")).toBe('robert-drop-table-organizations');
    expect(slugify('x'.repeat(100))).toHaveLength(MAX_SLUG_LENGTH);
  });

  it('slug - a name without ASCII letters still gets a slug', () => {
    expect(slugify('日本語')).toBe('organization');
    expect(slugify('🚀')).toBe('organization');
  });

  it('slug - collision candidates keep 48 characters: 43 + "-" + 4 letters', () => {
    const base = slugify('y'.repeat(60));
    expect(slugCandidate(base, 0)).toBe(base);
    const again = slugCandidate(base, 1);
    expect(again).toMatch(/^y{43}-[A-Za-z]{4}$/);
    expect(slugCandidate('acme', 3)).toMatch(/^acme-[A-Za-z]{4}$/);
    expect(slugCandidate('acme', 11)).toMatch(/^acme-[A-Za-z]{12}$/);
  });
});
