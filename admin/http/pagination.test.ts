import { describe, expect, it } from 'vitest';
import { pageOf, paginate } from './pagination.js';

describe('pagination', () => {
  it('pagination - limit defaults to 100; bad or non-positive limits fall back to it', () => {
    expect(pageOf({})).toEqual({ limit: 100, offset: 0 });
    for (const limit of ['0', '-5', 'abc', '1.5', '', '1e3']) expect(pageOf({ limit }).limit, limit).toBe(100);
    expect(pageOf({ limit: '7' }).limit).toBe(7);
    expect(pageOf({ limit: ['3', '9'] }).limit).toBe(9);
  });

  it('pagination - a limit above 1,000 means 1,000, and the links carry 1,000', () => {
    expect(pageOf({ limit: '1000' }).limit).toBe(1000);
    expect(pageOf({ limit: '1001' }).limit).toBe(1000);
    expect(pageOf({ limit: '99999999999999999999' }).limit).toBe(1000);
    const page = pageOf({ limit: '5000', offset: '1000' });
    expect(paginate(new URL('http://h/api/x/?limit=5000&offset=1000'), page, 2500, [])).toMatchObject({
      next: 'http://h/api/x/?limit=1000&offset=2000',
      previous: 'http://h/api/x/?limit=1000',
    });
  });

  it('pagination - a bad or negative offset is 0; huge numbers are capped, never an SQL error', () => {
    for (const offset of ['-1', 'x', '2.5']) expect(pageOf({ offset }).offset, offset).toBe(0);
    expect(pageOf({ offset: '40' }).offset).toBe(40);
    expect(pageOf({ offset: '99999999999999999999999' }).offset).toBe(Number.MAX_SAFE_INTEGER);
  });

  it('pagination - next and previous keep other parameters and sort them, as DRF does', () => {
    const url = new URL('http://h:1/api/x/?zeta=1&limit=2&offset=2&alpha=%C3%A9');
    const page = paginate(url, { limit: 2, offset: 2 }, 7, ['c', 'd']);
    expect(page.next).toBe('http://h:1/api/x/?alpha=%C3%A9&limit=2&offset=4&zeta=1');
    expect(page.previous).toBe('http://h:1/api/x/?alpha=%C3%A9&limit=2&zeta=1');
  });

  it('pagination - first, middle, last and past-the-end pages', () => {
    const url = new URL('http://h/api/x/');
    expect(paginate(url, { limit: 3, offset: 0 }, 7, [])).toMatchObject({ previous: null, next: 'http://h/api/x/?limit=3&offset=3' });
    expect(paginate(url, { limit: 3, offset: 4 }, 7, [])).toMatchObject({
      previous: 'http://h/api/x/?limit=3&offset=1',
      next: null,
    });
    expect(paginate(url, { limit: 3, offset: 6 }, 7, [])).toMatchObject({ previous: 'http://h/api/x/?limit=3&offset=3', next: null });
    expect(paginate(url, { limit: 3, offset: 50 }, 7, [])).toMatchObject({ previous: 'http://h/api/x/?limit=3&offset=47', next: null });
    expect(paginate(url, { limit: 100, offset: 0 }, 0, [])).toEqual({ count: 0, next: null, previous: null, results: [] });
  });
});
