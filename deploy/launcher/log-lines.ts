// How `npm start` shows its children's output. The deployables log pino JSON, one object a
// line: right for a machine reading the launcher's output (a file, a log shipper, a test), hard
// for a person at a terminal. On a terminal each line becomes short text (time, level, message,
// then the other fields on the same line) through pino-pretty; elsewhere it stays JSON.
// SPATE_LOG_FORMAT=json|pretty decides instead of the terminal test.
import { prettyFactory } from 'pino-pretty';
import { z } from 'zod';

export type LogFormat = 'json' | 'pretty';

export const LOG_FORMAT_ENV = 'SPATE_LOG_FORMAT';

const formatSetting = z.enum(['auto', 'json', 'pretty']);

/** The format for this run: the setting, or pretty exactly when the output is a terminal. */
export function logFormatOf(env: Readonly<Record<string, string | undefined>>, outputIsTerminal: boolean): LogFormat {
  const raw = env[LOG_FORMAT_ENV] || 'auto';
  const parsed = formatSetting.safeParse(raw);
  if (!parsed.success) throw new Error(`${LOG_FORMAT_ENV} must be auto, json or pretty (got ${JSON.stringify(raw)})`);
  if (parsed.data === 'auto') return outputIsTerminal ? 'pretty' : 'json';
  return parsed.data;
}

/** Turns one output line of a child into what the launcher prints (without the newline). */
export type LineFormatter = (name: string, line: string) => string;

export function lineFormatter(format: LogFormat, colorize = false): LineFormatter {
  if (format === 'json') return (name, line) => `[${name}] ${line}`;
  const pretty = prettyFactory({
    colorize,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss',
    // The role is in the prefix already; pid and host are the same on every line.
    ignore: 'pid,hostname,name,deployable',
  });
  return (name, line) => {
    // nats-server's and PostgreSQL's own lines are text already.
    if (!line.startsWith('{')) return `[${name}] ${line}`;
    let text: string;
    try {
      text = pretty(line);
    } catch {
      return `[${name}] ${line}`;
    }
    // An error's stack spans lines: each keeps the prefix, so interleaved output stays readable.
    return text
      .replace(/\n$/, '')
      .split('\n')
      .map((l) => `[${name}] ${l}`)
      .join('\n');
  };
}
