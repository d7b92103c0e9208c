import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generatePersonalApiKey, generateProjectApiKey, hashPersonalApiKey, maskPersonalApiKey, randomToken } from './keys.js';

describe('api keys', () => {
  it('keys - personal keys are phx_ + base62 of 35 random bytes, project keys phc_', () => {
    const key = generatePersonalApiKey();
    expect(key).toMatch(/^phx_[0-9A-Za-z]{40,48}$/);
    expect(generateProjectApiKey()).toMatch(/^phc_[0-9A-Za-z]{40,48}$/);
    const many = new Set(Array.from({ length: 1000 }, () => randomToken()));
    expect(many.size).toBe(1000);
  });

  it('keys - stored form is sha256$ + hex digest of the key, with no salt', () => {
    const key = 'phx_abc';
    expect(hashPersonalApiKey(key)).toBe(`sha256$${createHash('sha256').update(key).digest('hex')}`);
    expect(hashPersonalApiKey(key)).toBe(hashPersonalApiKey(key));
  });

  it('keys - the mask shows the prefix and the last four characters only', () => {
    expect(maskPersonalApiKey('phx_0123456789abcdefWXYZ')).toBe('phx_...WXYZ');
  });
});
