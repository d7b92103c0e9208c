// Failures every role that holds a lease tells apart: the lease (or the fence behind it) is gone,
// and the text an error is logged with.

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

export function errorText(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}
