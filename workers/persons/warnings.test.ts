import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WARNING_TYPES } from './warnings.js';

const docs = readFileSync(new URL('../../docs/workers.md', import.meta.url), 'utf8');

describe('ingestion warning types', () => {
  it('warnings - every type a worker stores is documented in docs/workers.md', () => {
    for (const type of WARNING_TYPES) expect(docs, type).toContain(`\`${type}\``);
  });
});
