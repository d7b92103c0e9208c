import { describe, expect, it } from 'vitest';

describe('uws loader', () => {
  it('uws - sets UWS_HTTP_MAX_HEADERS_SIZE to 64 KiB when unset, as it loads the addon', async () => {
    const before = process.env.UWS_HTTP_MAX_HEADERS_SIZE;
    delete process.env.UWS_HTTP_MAX_HEADERS_SIZE;
    try {
      const { uws, DEFAULT_MAX_HEADERS_SIZE } = await import('./uws.js');
      expect(typeof uws.App).toBe('function');
      expect(DEFAULT_MAX_HEADERS_SIZE).toBe('65536');
      expect(process.env.UWS_HTTP_MAX_HEADERS_SIZE).toBe('65536');
    } finally {
      if (before === undefined) delete process.env.UWS_HTTP_MAX_HEADERS_SIZE;
      else process.env.UWS_HTTP_MAX_HEADERS_SIZE = before;
    }
  });
});
