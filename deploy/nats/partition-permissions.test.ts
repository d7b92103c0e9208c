import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_STREAM_PARTITIONS } from '../../lib/index.js';
import { natsConfigDir } from '../local/nats-server.js';
import { partitionStreamNames, withPartitionBlocks } from './partition-permissions.js';

describe('partition permissions', () => {
  it('nats auth - auth.conf names every partition stream the code can make (npx tsx deploy/nats/partition-permissions.ts rewrites it)', () => {
    const text = readFileSync(join(natsConfigDir(), 'auth.conf'), 'utf8');
    expect(withPartitionBlocks(text)).toBe(text);
    const names = partitionStreamNames();
    expect(names).toHaveLength(3 * MAX_STREAM_PARTITIONS);
    expect(names).toContain(`OVERFLOW_${MAX_STREAM_PARTITIONS - 1}`);
    for (const name of names) {
      // The ingest user creates it, the worker reads it, the admin user sizes it.
      for (const subject of [`$JS.API.STREAM.CREATE.${name}`, `$JS.API.CONSUMER.MSG.NEXT.${name}.>`, `$JS.API.STREAM.INFO.${name}`]) expect(text).toContain(`"${subject}"`);
    }
  });
});
