// Failures every role that holds a lease tells apart: the lease (or the fence behind it) is gone;
// a failure of the moment (worth waiting out) or one the work itself causes every time; and the
// text an error is logged with.
import pg from 'pg';
import { isTransientDbError } from './db.js';

/** The work's lease lapsed or its fence was raised by a new owner: stop, commit nothing more. */
export class OwnershipLostError extends Error {
  override name = 'OwnershipLostError';
}

/** NATS did not answer (timeout, no responders, connection closed or cut): ask again later. */
export function isNatsUnavailable(err: unknown): boolean {
  const name = (err as { name?: string } | undefined)?.name ?? '';
  const message = (err as { message?: string } | undefined)?.message ?? '';
  return /Timeout|NoResponders|Closed|Disconnect/i.test(name) || /timeout|no responders|disconnect|closed/i.test(message);
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
