// Structured logs (pino) on stdout. Level from LOG_LEVEL; each deployable names itself.
import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * A personal API key (`phx_` + base62) anywhere in a line: a URL, a request echoed in an error,
 * a message built from client input. Keys are credentials and logs are read by more people than
 * keys are meant for, so every line is scrubbed on its way out, whatever logged it.
 */
const PERSONAL_API_KEY = /phx_[0-9A-Za-z]+/g;
export const REDACTED = '[redacted]';

/** The line with every personal API key replaced (the prefix stays, to show what was there). */
export function redactSecrets(line: string): string {
  return line.includes('phx_') ? line.replace(PERSONAL_API_KEY, `phx_${REDACTED}`) : line;
}

export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid }, hooks: { streamWrite: redactSecrets } });
}
