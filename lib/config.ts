// Configuration: one definition per deployable, read from the environment once,
// every problem reported at once, then frozen. The same definition prints `--help`
// and the configuration tables of docs/configuration.md, so documentation cannot drift from code.
import { z } from 'zod';

export interface Setting<T extends z.ZodType = z.ZodType> {
  readonly env: string;
  readonly schema: T;
  readonly description: string;
}

export type ConfigDefinition = Readonly<Record<string, Setting>>;

export type ConfigOf<D extends ConfigDefinition> = {
  readonly [K in keyof D]: z.output<D[K]['schema']>;
};

/** Declares one setting: its environment variable, its schema (with default) and what it is for. */
export function setting<T extends z.ZodType>(env: string, schema: T, description: string): Setting<T> {
  return { env, schema, description };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(readonly problems: readonly string[], options?: ErrorOptions) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`, options);
  }
}

/** Reads every setting of `definition` from `env`; throws one ConfigError naming every bad variable. */
export function loadConfig<D extends ConfigDefinition>(
  definition: D,
  env: Readonly<Record<string, string | undefined>> = process.env,
): ConfigOf<D> {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, s] of Object.entries(definition)) {
    const raw = env[s.env];
    const result = s.schema.safeParse(raw === '' ? undefined : raw);
    if (result.success) out[key] = result.data;
    else problems.push(`${s.env}: ${result.error.issues.map((i) => i.message).join('; ')} (got ${JSON.stringify(raw)})`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(out) as ConfigOf<D>;
}

export interface SettingDescription {
  env: string;
  default: string;
  description: string;
}

export function describeConfig(definition: ConfigDefinition): SettingDescription[] {
  return Object.values(definition).map((s) => {
    const parsed = s.schema.safeParse(undefined);
    const shown = shownDefaults.get(s.schema) ?? (parsed.success && parsed.data !== undefined ? formatDefault(parsed.data) : '(required)');
    const def = shown === '' ? '(empty)' : shown;
    return { env: s.env, default: def, description: s.description };
  });
}

function formatDefault(value: unknown): string {
  if (Array.isArray(value)) return value.join(',');
  if (typeof value === 'object' && value !== null) return JSON.stringify(value);
  return String(value);
}

/** `--help` text for a deployable. */
export function configHelp(title: string, definition: ConfigDefinition): string {
  const rows = describeConfig(definition);
  const width = Math.max(...rows.map((r) => r.env.length));
  return [
    `${title}\n\nConfiguration (environment variables):`,
    ...rows.map((r) => `  ${r.env.padEnd(width)}  ${r.description} [default: ${r.default}]`),
  ].join('\n');
}

/** Markdown table rows, as docs/configuration.md shows them. */
export function configMarkdown(definition: ConfigDefinition): string {
  const lines = ['| variable | default | meaning |', '|---|---|---|'];
  for (const r of describeConfig(definition)) {
    lines.push(`| \`${r.env}\` | \`${r.default.replace(/\|/g, '\\|')}\` | ${r.description} |`);
  }
  return lines.join('\n');
}

// Shared schema helpers. Environment values are strings; these coerce them.
export const envInt = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
export const envNumber = (def: number, min = 0) => z.coerce.number().min(min).default(def);
export const envBool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'expected true or false' })
    .transform((v) => v === 'true' || v === '1' || v === 'yes')
    .default(def);
export const envString = (def: string) => z.string().default(def);

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses "250ms", "2s", "5m", "1h", "7d" (or a bare number of milliseconds) into milliseconds. */
export function parseDuration(text: string): number {
  if (/^\d+$/.test(text)) return Number(text);
  const m = DURATION.exec(text);
  if (!m) throw new Error(`not a duration: ${text}`);
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
}

/** Defaults as a person writes them ("2m"), for help and docs, where the schema's output is ms. */
const shownDefaults = new WeakMap<z.ZodType, string>();

function showDefault<T extends z.ZodType>(schema: T, text: string): T {
  shownDefaults.set(schema, text);
  return schema;
}

export const envDuration = (def: string) =>
  showDefault(z
    .string()
    .default(def)
    .transform((v, ctx) => {
      try {
        return parseDuration(v);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'expected a duration such as 500ms, 2s, 5m, 1h, 7d' });
        return z.NEVER;
      }
    }), def);

const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i;
const UNIT_BYTES: Record<string, number> = { b: 1, kb: 1e3, kib: 1024, mb: 1e6, mib: 1024 ** 2, gb: 1e9, gib: 1024 ** 3 };

/** Parses "20MB" (10^6), "512KiB" (2^10), or a bare byte count. "-1" means unlimited. */
export function parseByteSize(text: string): number {
  if (text.trim() === '-1') return -1;
  const m = SIZE.exec(text.trim());
  if (!m) throw new Error(`not a size: ${text}`);
  return Math.floor(Number(m[1]) * UNIT_BYTES[(m[2] ?? 'b').toLowerCase()]!);
}

/** A zod transform from a size setting to bytes, reporting a bad value as the setting's issue. */
export function byteSize(v: string, ctx: z.RefinementCtx): number {
  try {
    return parseByteSize(v);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'expected a size such as 20MB, 512KiB or a byte count' });
    return z.NEVER;
  }
}

/** `N/M` (e.g. `10/50`: 10 of the last 50) as { n, of }. */
export const envRatio = (def: string) =>
  showDefault(
    z
      .string()
      .regex(/^\d+\/\d+$/, 'N/M, e.g. 10/50')
      .default(def)
      .transform((v) => {
        const [n, of] = v.split('/').map(Number) as [number, number];
        return { n, of };
      }),
    def,
  );

/** A size setting; `min` refuses smaller sizes (and -1, unlimited) at start, as envInt's minimum does. */
export const envBytes = (def: string, min?: number) =>
  showDefault(
    min === undefined ? z.string().default(def).transform(byteSize) : z.string().default(def).transform(byteSize).pipe(z.number().min(min, `at least ${min} bytes`)),
    def,
  );
