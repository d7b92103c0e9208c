// What a plugin's sandbox may ask of the host (docs/plugins.md, "meta"): fetch through the egress
// policy (PLUGIN_EGRESS_ALLOW), meta.storage (table plugin_storage, persistent) and meta.cache
// (table plugin_cache, with expiry), each scoped to one plugin config.
import http from 'node:http';
import https from 'node:https';
import type pg from 'pg';
import { egressPolicy, type EgressPolicy } from '../coordination/index.js';

/** A failure a plugin sees as the rejection of its call (its message is the plugin's to log). */
export class HostOpError extends Error {
  override name = 'HostOpError';
}

const MAX_RESPONSE_BYTES = 5 * 1024 * 1024;
const MAX_KEY_CHARS = 200;
const MAX_VALUE_BYTES = 1024 * 1024;

export function pluginEgressPolicy(allow: string): EgressPolicy {
  return egressPolicy(allow, {
    setting: 'PLUGIN_EGRESS_ALLOW',
    what: 'fetch host',
    refused: (message) => new HostOpError(message),
    notFound: (message) => new HostOpError(message),
  });
}

interface FetchRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | null;
}

export interface FetchAnswer {
  status: number;
  statusText: string;
  url: string;
  headers: Array<[string, string]>;
  body: string;
}

/** One HTTP request (no redirects followed), the host's side of the sandbox's `fetch`. */
export async function pluginFetch(egress: EgressPolicy, request: FetchRequest, timeoutMs: number): Promise<FetchAnswer> {
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    throw new HostOpError(`fetch: ${JSON.stringify(request.url)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new HostOpError(`fetch: only http and https URLs, not ${url.protocol}`);
  // Names are checked on every connection (lookup); an address written in the URL is checked here.
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  if (/^[0-9.]+$|:/.test(hostname)) egress.check(url.hostname, hostname);
  const send = url.protocol === 'https:' ? https.request : http.request;
  return new Promise<FetchAnswer>((resolve, reject) => {
    const req = send(
      url,
      { method: request.method.toUpperCase(), headers: request.headers, lookup: egress.lookup, timeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) },
      (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > MAX_RESPONSE_BYTES) {
            req.destroy(new HostOpError(`fetch ${url.host}: the response is larger than ${MAX_RESPONSE_BYTES} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            statusText: res.statusMessage ?? '',
            url: url.href,
            headers: Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]),
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', (err) => reject(err instanceof HostOpError ? err : new HostOpError(`fetch ${url.host}: ${err.message}`)));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => reject(err instanceof HostOpError ? err : new HostOpError(`fetch ${url.host}: ${err.code ? `${err.code} ` : ''}${err.message}`)));
    if (request.body !== null) req.write(request.body);
    req.end();
  });
}

function key(args: unknown, at = 0): string {
  const k = Array.isArray(args) ? (args[at] as unknown) : undefined;
  if (typeof k !== 'string' || k.length === 0 || k.length > MAX_KEY_CHARS) throw new HostOpError(`a key is a string of 1 to ${MAX_KEY_CHARS} characters`);
  return k;
}

function jsonValue(args: unknown, at: number): string {
  const boxed = Array.isArray(args) ? (args[at] as { value?: unknown } | undefined) : undefined;
  const text = JSON.stringify(boxed?.value ?? null);
  if (Buffer.byteLength(text) > MAX_VALUE_BYTES) throw new HostOpError(`a stored value is at most ${MAX_VALUE_BYTES} bytes of JSON`);
  return text;
}

/** meta.storage and meta.cache of one config. Values cross as `{value}` (null: absent). */
export async function storageOrCacheOp(db: pg.Pool, configId: number, op: string, args: unknown): Promise<unknown> {
  switch (op) {
    case 'storage.get': {
      const { rows } = await db.query<{ value: unknown }>('SELECT value FROM plugin_storage WHERE plugin_config_id = $1 AND key = $2', [configId, key(args)]);
      return rows[0] ? { value: rows[0].value } : null;
    }
    case 'storage.set':
      await db.query(
        `INSERT INTO plugin_storage (plugin_config_id, key, value) VALUES ($1, $2, $3)
         ON CONFLICT (plugin_config_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
        [configId, key(args), jsonValue(args, 1)],
      );
      return null;
    case 'storage.del':
      await db.query('DELETE FROM plugin_storage WHERE plugin_config_id = $1 AND key = $2', [configId, key(args)]);
      return null;
    case 'cache.get': {
      const { rows } = await db.query<{ value: unknown }>(
        'SELECT value FROM plugin_cache WHERE plugin_config_id = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > now())',
        [configId, key(args)],
      );
      return rows[0] ? { value: rows[0].value } : null;
    }
    case 'cache.set': {
      const ttl = Array.isArray(args) ? (args[2] as unknown) : null;
      await db.query(
        `INSERT INTO plugin_cache (plugin_config_id, key, value, expires_at)
         VALUES ($1, $2, $3, CASE WHEN $4::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => $4::float8) END)
         ON CONFLICT (plugin_config_id, key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`,
        [configId, key(args), jsonValue(args, 1), typeof ttl === 'number' && ttl > 0 ? ttl : null],
      );
      return null;
    }
    case 'cache.incr': {
      const by = Array.isArray(args) && typeof args[1] === 'number' && Number.isFinite(args[1]) ? args[1] : 1;
      // An expired or non-numeric value counts as 0, as a missing one does.
      const { rows } = await db.query<{ value: number }>(
        `INSERT INTO plugin_cache (plugin_config_id, key, value) VALUES ($1, $2, to_jsonb($3::float8))
         ON CONFLICT (plugin_config_id, key) DO UPDATE SET
           value = to_jsonb(CASE WHEN plugin_cache.expires_at IS NOT NULL AND plugin_cache.expires_at <= now() THEN 0
                                 WHEN jsonb_typeof(plugin_cache.value) = 'number' THEN (plugin_cache.value)::text::float8 ELSE 0 END + $3::float8),
           expires_at = CASE WHEN plugin_cache.expires_at IS NOT NULL AND plugin_cache.expires_at <= now() THEN NULL ELSE plugin_cache.expires_at END
         RETURNING (value)::text::float8 AS value`,
        [configId, key(args), by],
      );
      return rows[0]!.value;
    }
    case 'cache.expire': {
      const ttl = Array.isArray(args) && typeof args[1] === 'number' ? args[1] : 0;
      const { rowCount } = await db.query(
        `UPDATE plugin_cache SET expires_at = now() + make_interval(secs => $3::float8)
         WHERE plugin_config_id = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > now())`,
        [configId, key(args), ttl],
      );
      return (rowCount ?? 0) > 0;
    }
    default:
      throw new HostOpError(`${op} is not available in Spate`);
  }
}
