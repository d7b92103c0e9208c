import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isDeterministicFailure, OwnershipLostError } from './failures.js';

function pgError(code: string, message = 'refused'): pg.DatabaseError {
  const err = new pg.DatabaseError(message, message.length, 'error');
  err.code = code;
  return err;
}

describe('failure classes', () => {
  it('failures - the data refused or our own code throwing are deterministic; outages, conflicts and server problems are of the moment', () => {
    for (const err of [
      pgError('22008', 'date/time field value out of range'),
      pgError('22P05', 'unsupported Unicode escape sequence'),
      pgError('54001', 'stack depth limit exceeded'),
      pgError('23514', 'violates check constraint'),
      new RangeError('Maximum call stack size exceeded'),
      new TypeError("Cannot read properties of undefined (reading 'uuid')"),
      new Error('person 1 of 2 was not loaded'),
      new OwnershipLostError('a role tells control flow apart before asking'),
    ]) {
      expect(isDeterministicFailure(err), String(err)).toBe(true);
    }
    for (const err of [
      pgError('40001', 'could not serialize access'),
      pgError('40P01', 'deadlock detected'),
      pgError('23505', 'duplicate key value'),
      pgError('57P01', 'terminating connection due to administrator command'),
      pgError('08006', 'connection failure'),
      pgError('53100', 'could not extend file: No space left on device'),
      pgError('42P01', 'relation "persons" does not exist'),
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      new Error('Connection terminated unexpectedly'),
      Object.assign(new Error('TIMEOUT'), { name: 'TimeoutError' }),
      Object.assign(new Error('no responders'), { name: 'NoRespondersError' }),
      // A stream whose leader is lost (the multi-host rig's faults): nats.js and the server say so.
      Object.assign(new Error('jetstream is not enabled', { cause: Object.assign(new Error("no responders: 'events.1.8'"), { name: 'NoResponders' }) }), { name: 'JetStreamNotEnabled' }),
      Object.assign(new Error('JetStream system temporarily unavailable'), { name: 'JetStreamApiError' }),
      'not an error',
    ]) {
      expect(isDeterministicFailure(err), String(err)).toBe(false);
    }
  });
});
