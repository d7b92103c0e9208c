// Batch export destinations: the types Spate's runner supports, their configuration fields, which
// of them are secrets (never in API answers) and how a configuration is checked. Messages are
// worded as PostHog words them ("Configuration has unknown field/s: 'a', 'b'").
import { isPlainObject } from '../lib/index.js';
import { apiError } from './errors.js';

type FieldType = 'str' | 'int' | 'bool' | 'list';

interface FieldSpec {
  type: FieldType;
  /** Must be present on create (a PATCH may leave it out: it keeps the stored value). */
  required?: boolean;
  /** Removed from every API answer; kept in storage and in the runner's KV record. */
  secret?: boolean;
}

const EVENT_FILTERS: Record<string, FieldSpec> = {
  exclude_events: { type: 'list' },
  include_events: { type: 'list' },
};

/** Fields in declaration order (the first missing required field is the one reported). */
export const DESTINATIONS = {
  S3: {
    bucket_name: { type: 'str', required: true },
    region: { type: 'str', required: true },
    prefix: { type: 'str', required: true },
    aws_access_key_id: { type: 'str', secret: true },
    aws_secret_access_key: { type: 'str', secret: true },
    compression: { type: 'str' },
    encryption: { type: 'str' },
    kms_key_id: { type: 'str' },
    endpoint_url: { type: 'str' },
    file_format: { type: 'str' },
    max_file_size_mb: { type: 'int' },
    use_virtual_style_addressing: { type: 'bool' },
    ...EVENT_FILTERS,
  },
  Postgres: {
    user: { type: 'str', required: true, secret: true },
    password: { type: 'str', required: true, secret: true },
    host: { type: 'str', required: true },
    database: { type: 'str', required: true },
    schema: { type: 'str' },
    table_name: { type: 'str' },
    port: { type: 'int' },
    has_self_signed_cert: { type: 'bool' },
    ...EVENT_FILTERS,
  },
  HTTP: {
    url: { type: 'str', required: true },
    token: { type: 'str', required: true, secret: true },
    ...EVENT_FILTERS,
  },
  NoOp: {
    arg: { type: 'str' },
    ...EVENT_FILTERS,
  },
} as const satisfies Record<string, Record<string, FieldSpec>>;

export type DestinationType = keyof typeof DESTINATIONS;
export const DESTINATION_TYPES = Object.keys(DESTINATIONS) as DestinationType[];

/** S3 file formats and the compressions each supports. */
export const S3_COMPRESSIONS: Readonly<Record<string, readonly string[]>> = {
  Parquet: ['zstd', 'lz4', 'snappy', 'gzip', 'brotli'],
  JSONLines: ['gzip', 'brotli'],
};

const CONFIG_ATTR = 'destination__config';

function pythonType(value: unknown): string {
  if (value === null) return 'NoneType';
  if (Array.isArray(value)) return 'list';
  switch (typeof value) {
    case 'string':
      return 'str';
    case 'number':
      return Number.isInteger(value) ? 'int' : 'float';
    case 'boolean':
      return 'bool';
    default:
      return 'dict';
  }
}

const TRUE_WORDS = new Set(['y', 'yes', 't', 'true', 'on', '1']);
const FALSE_WORDS = new Set(['n', 'no', 'f', 'false', 'off', '0']);

/** The value as `type`, converting a string where PostHog does (to int or bool); undefined if impossible. */
function coerce(value: unknown, type: FieldType): unknown {
  switch (type) {
    case 'str':
      return typeof value === 'string' && !value.includes('\u0000') ? value : undefined;
    case 'int':
      if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
      if (typeof value === 'string' && /^\s*[+-]?\d{1,15}\s*$/.test(value)) return Number(value);
      return undefined;
    case 'bool':
      if (typeof value === 'boolean') return value;
      if (typeof value === 'string' && TRUE_WORDS.has(value.trim().toLowerCase())) return true;
      if (typeof value === 'string' && FALSE_WORDS.has(value.trim().toLowerCase())) return false;
      return undefined;
    case 'list':
      return Array.isArray(value) && value.every((v) => typeof v === 'string' && !v.includes('\u0000')) ? value : undefined;
  }
}

/**
 * Checks `config` for destination `type`: no unknown fields, every required field on create
 * (`partial` skips that, as for a PATCH), values of the field's type (strings converted to
 * numbers and booleans where possible; optional fields may be null). Returns the config with
 * converted values. Throws a 400 validation_error with attr `destination__config`.
 */
export function checkDestinationConfig(type: DestinationType, config: Record<string, unknown>, partial: boolean): Record<string, unknown> {
  const fields: Record<string, FieldSpec> = DESTINATIONS[type];
  const unknown = Object.keys(config).filter((k) => !Object.hasOwn(fields, k)).sort();
  if (unknown.length > 0) {
    throw apiError('validation_error', `Configuration has unknown field/s: ${unknown.map((k) => `'${k}'`).join(', ')}`, CONFIG_ATTR);
  }
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(fields)) {
    if (!Object.hasOwn(config, name)) {
      if (spec.required && !partial) throw apiError('validation_error', `Configuration missing required field: '${name}'`, CONFIG_ATTR);
      continue;
    }
    const value = config[name];
    if (value === null && !spec.required) {
      out[name] = null;
      continue;
    }
    const converted = coerce(value, spec.type);
    if (converted === undefined) {
      throw apiError('validation_error', `Configuration has invalid type: got '${pythonType(value)}', expected '${spec.type}'`, CONFIG_ATTR);
    }
    out[name] = converted;
  }
  return out;
}

/** Rules that look at the whole (merged) configuration and the export's model. */
export function checkDestinationRules(type: DestinationType, config: Record<string, unknown>, model: string): void {
  if (type === 'HTTP' && model !== 'events') throw apiError('validation_error', 'HTTP batch exports only support the events model', 'model');
  if (type === 'S3') {
    const format = typeof config.file_format === 'string' ? config.file_format : 'JSONLines';
    const compressions = S3_COMPRESSIONS[format];
    if (!compressions) {
      const supported = Object.keys(S3_COMPRESSIONS).map((f) => `'${f}'`).join(', ');
      throw apiError('validation_error', `File format ${format} is not supported. Supported file formats are [${supported}]`, CONFIG_ATTR);
    }
    const compression = config.compression;
    if (typeof compression === 'string' && compression !== '' && !compressions.includes(compression)) {
      throw apiError(
        'validation_error',
        `Compression ${compression} is not supported for file format ${format}. Supported compressions are [${compressions.map((c) => `'${c}'`).join(', ')}]`,
        CONFIG_ATTR,
      );
    }
  }
}

/** The configuration as API answers show it: secret fields left out. */
export function publicDestinationConfig(type: string, config: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, FieldSpec> = (DESTINATIONS as Record<string, Record<string, FieldSpec>>)[type] ?? {};
  return Object.fromEntries(Object.entries(config).filter(([k]) => !fields[k]?.secret));
}

/** `patch` merged into `base`; nested objects are merged the same way, anything else replaced. */
export function deepMerge(base: Record<string, unknown>, patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    const old = out[k];
    out[k] =
      isPlainObject(v) && isPlainObject(old) ? deepMerge(old, v) : v;
  }
  return out;
}
