// Failures every role that holds a lease tells apart: the lease (or the fence behind it) is gone;
// a failure of the moment (worth waiting out) or one the work itself causes every time; and the
// text an error is logged with.
import pg from 'pg';
import { isTransientDbError } from './db.js';

/** The work's lease lapsed or its fence was raised by a new owner: stop, commit nothing more. */
export class OwnershipLostError extends Error {
  override name = 'OwnershipLostError';
}

/**
 * NATS did not answer (timeout, no responders, connection closed or cut) or JetStream could not
 * (a stream without a leader: nats.js says "jetstream is not enabled" for the no responders under
 * it, the server "JetStream system temporarily unavailable"): ask again later. Causes count too.
 */
export function isNatsUnavailable(err: unknown): boolean {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const name = (e as { name?: string }).name ?? '';
    const message = (e as { message?: string }).message ?? '';
    if (/Timeout|NoResponders|Closed|Disconnect|JetStreamNotEnabled/i.test(name)) return true;
    if (/timeout|no responders|disconnect|closed|jetstream is not enabled|temporarily unavailable/i.test(message)) return true;
  }
  return false;
}

/**
 * PostgreSQL refuses the data itself: class 22 (data exception: a value out of range, bad
 * encoding), 23 (integrity, except a unique key taken by a concurrent writer: 23505, a conflict),
 * 54 (program limit exceeded: too deep, too large).
 */
const DATA_SQLSTATE_CLASSES = new Set(['22', '23', '54']);

/**
 * True for a failure that the same work will meet again every time, so retrying cannot help:
 * PostgreSQL refusing the data (above) and any exception of our own code (RangeError from
 * JSON.stringify on a too deep value, TypeError, an Error of a broken assumption). False for
 * failures of the moment: connection loss, timeouts, serialization and deadlock conflicts, NATS
 * not answering, and every other PostgreSQL error (a server or schema problem: waited out).
 * Control-flow errors (ownership lost, stopping) are the caller's to tell apart first.
 */
export function isDeterministicFailure(err: unknown): boolean {
  if (isTransientDbError(err) || isNatsUnavailable(err)) return false;
  if (err instanceof pg.DatabaseError) {
    const code = err.code ?? '';
    return code !== '23505' && DATA_SQLSTATE_CLASSES.has(code.slice(0, 2));
  }
  return err instanceof Error;
}

/** What an error is logged and reported as: `<name>: <message>`, with the SQLSTATE when PostgreSQL refused. */
export function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = err instanceof pg.DatabaseError && err.code ? ` (SQLSTATE ${err.code})` : '';
  return `${err.name}: ${err.message}${code}`;
}
