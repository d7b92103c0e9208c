// The project API key of a request: the batch-level `api_key`/`token` wins; otherwise every
// event's `token`/`$token`/`api_key`/`properties.token` that is present must agree.
import { CaptureError } from '../errors.js';

const MAX_TOKEN_LENGTH = 64;

function eventToken(event: Record<string, unknown>): unknown {
  const props = event.properties as Record<string, unknown> | undefined;
  return event.token ?? event.$token ?? event.api_key ?? props?.token;
}

/** Why a token is malformed, in PostHog's words, or undefined when it is well-formed. */
export function tokenProblem(token: string): string | undefined {
  if (token.length === 0) return 'empty';
  if (token.length > MAX_TOKEN_LENGTH) return 'too_long';
  if (token.includes('\0')) return 'null_byte';
  if (!/^[\x00-\x7f]*$/.test(token)) return 'not_ascii';
  if (token.startsWith('phx_')) return 'personal_api_key';
  return undefined;
}

export function resolveToken(batchToken: unknown, events: readonly Record<string, unknown>[]): string {
  let found: unknown = batchToken ?? undefined;
  if (found === undefined) {
    for (const event of events) {
      const t = eventToken(event);
      if (t === undefined || t === null) continue;
      if (found === undefined) found = t;
      else if (normalize(t) !== normalize(found)) throw new CaptureError('inconsistent_api_key');
    }
  }
  if (found === undefined) throw new CaptureError('missing_api_key');
  if (typeof found !== 'string') throw new CaptureError('invalid_api_key', 'API key is not valid: not a string', { attr: 'api_key' });
  const token = found.trim();
  const problem = tokenProblem(token);
  if (problem) throw new CaptureError('invalid_api_key', `API key is not valid: ${problem}`, { attr: 'api_key' });
  return token;
}

function normalize(token: unknown): unknown {
  return typeof token === 'string' ? token.trim() : token;
}
