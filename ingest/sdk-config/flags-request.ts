// The two facts Spate needs from a feature-flag call's body: the project key and the distinct
// id. Bodies come in every encoding the SDKs use, the same ones capture reads: JSON
// (posthog-node, posthog-js-lite), form `data=` base64 with `?compression=base64` (posthog-js),
// gzip by hint or magic bytes, plain base64. They are small (a distinct id and a few
// properties), so they are read on the event loop, bounded by `maxDecodedBytes`.
import { CaptureError } from '../errors.js';
import { decodePayload, payloadText, tokenProblem } from '../parse/index.js';

export interface FlagsRequestInput {
  body: Uint8Array;
  /** The raw query string, without `?`. */
  query: string;
  contentType: string;
  contentEncoding: string;
  maxDecodedBytes: number;
}

export interface FlagsRequest {
  token: string;
  distinctId: string;
}

export function readFlagsRequest(input: FlagsRequestInput): FlagsRequest {
  const text = payloadText(
    decodePayload({
      body: input.body,
      query: new URLSearchParams(input.query),
      contentType: input.contentType,
      contentEncoding: input.contentEncoding,
      legacyPath: false,
      maxDecompressedBytes: input.maxDecodedBytes,
    }),
  );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CaptureError('invalid_json', undefined, {}, { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new CaptureError('invalid_payload', 'failed to decode request: not a JSON object');
  const fields = parsed as Record<string, unknown>;
  // PostHog's order: the key (token, api_key, $token), then the distinct id.
  const token = fields.token ?? fields.api_key ?? fields.$token;
  if (token === undefined || token === null || token === '') throw new CaptureError('missing_api_key');
  if (typeof token !== 'string') throw new CaptureError('invalid_api_key', 'API key is not valid: not a string', { attr: 'token' });
  const problem = tokenProblem(token.trim());
  if (problem) throw new CaptureError('invalid_api_key', `API key is not valid: ${problem}`, { attr: 'token' });
  const distinctId = fields.distinct_id;
  if (distinctId === undefined || distinctId === null) throw new CaptureError('missing_distinct_id');
  const id = typeof distinctId === 'number' ? String(distinctId) : distinctId;
  if (typeof id !== 'string' || id.trim() === '') throw new CaptureError('missing_distinct_id', 'The distinct_id field cannot be empty.');
  return { token: token.trim(), distinctId: id };
}
