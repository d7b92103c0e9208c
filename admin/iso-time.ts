// ISO 8601 dates and times as PostHog (Python's datetime.fromisoformat) reads them: calendar
// checked (no 30 February rolling over into March), an optional UTC offset, up to nanoseconds.

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

export interface IsoTime {
  date: Date;
  /** False for a date without a time. */
  hasTime: boolean;
  /** False when no offset was given ("naive"): `date` then reads it as UTC. */
  zoned: boolean;
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

export function parseIsoTime(text: string): IsoTime | undefined {
  const m = ISO.exec(text);
  if (!m) return undefined;
  const part = (i: number) => (m[i] === undefined ? 0 : Number(m[i]));
  const [year, month, day, hour, minute, second] = [part(1), part(2), part(3), part(4), part(5), part(6)];
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  const ms = m[7] ? Math.floor(Number(`0.${m[7]}`) * 1000) : 0;
  let offsetMinutes = 0;
  const zone = m[8];
  if (zone && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms) - offsetMinutes * 60_000;
  const date = new Date(utc);
  // Date.UTC maps years 0–99 to 1900–1999; setUTCFullYear puts them back.
  if (year < 100) date.setUTCFullYear(date.getUTCFullYear() - 1900);
  if (Number.isNaN(date.getTime())) return undefined;
  return { date, hasTime: m[4] !== undefined, zoned: zone !== undefined };
}

/** An ISO 8601 date and time (no offset means UTC); undefined for anything else, dates alone included. */
export function parseTimestamp(value: unknown): Date | undefined {
  if (typeof value !== 'string') return undefined;
  const parsed = parseIsoTime(value);
  return parsed?.hasTime ? parsed.date : undefined;
}
