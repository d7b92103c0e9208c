import fc from 'fast-check';
import { v5 as uuidv5 } from 'uuid';
import { describe, expect, it } from 'vitest';
import { personUuidFor } from './person-workspace.js';

describe('person uuids', () => {
  // Persons already stored carry these uuids, and a replayed batch must make the same ones: the
  // derivation may get faster, never different.
  it('person workspace - a person uuid is uuid v5 of "<project>:<distinct id>" in the person namespace, for any text', () => {
    // What the derivation gave before it took bytes (persons stored with these).
    expect(personUuidFor(1, 'user-1')).toBe('42980edd-dc8c-5ff5-84ff-499384bf342a');
    expect(personUuidFor(1, 'Zoë 🚀')).toBe('b6bb4fa0-3b4f-521c-911b-72bb7b49ff79');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 31 }), fc.string({ unit: 'grapheme', maxLength: 40 }), (project, distinctId) => {
        expect(personUuidFor(project, distinctId)).toBe(uuidv5(`${project}:${distinctId}`, 'a8f0e3c2-5d7b-4c1e-9f26-3b8e6d4a1c57'));
      }),
      { numRuns: 2_000 },
    );
  });
});
