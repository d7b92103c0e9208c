import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isUuid } from '../../lib/index.js';
import { eventUuidFactory, positionOfEventUuid } from './event-uuid.js';

const identity = (text: string) => createHash('sha256').update(text).digest('hex');

describe('import event uuid', () => {
  it('import event uuid - is a valid version 8 uuid, the same for the same file and position', () => {
    const a = eventUuidFactory(identity('file a'));
    const u = a(12345);
    expect(isUuid(u)).toBe(true);
    expect(u[14]).toBe('8');
    expect('89ab').toContain(u[19]);
    expect(eventUuidFactory(identity('file a'))(12345)).toBe(u);
    expect(positionOfEventUuid(u)).toBe(12345);
  });

  it('import event uuid - differs between positions and between files', () => {
    const a = eventUuidFactory(identity('file a'));
    const b = eventUuidFactory(identity('file b'));
    const ids = new Set<string>();
    for (let i = 1; i <= 10_000; i++) {
      ids.add(a(i));
      ids.add(b(i));
    }
    expect(ids.size).toBe(20_000);
  });

  it('import event uuid - refuses positions it cannot encode', () => {
    const a = eventUuidFactory(identity('x'));
    expect(() => a(2 ** 48)).toThrow(RangeError);
    expect(() => a(-1)).toThrow(RangeError);
    expect(() => eventUuidFactory('XYZ')).toThrow();
  });
});
