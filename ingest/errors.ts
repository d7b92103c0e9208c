// Every answer the capture endpoints give other than success. Codes are stable: clients
// and dashboards key on them. docs/capture-api.md, "Answers", documents each (a test checks).
import { ApiError, defineErrors, errorMapper } from '../lib/index.js';

export const captureErrors = defineErrors({
  no_data: { status: 400, type: 'validation_error', detail: 'request missing data payload' },
  invalid_payload: { status: 400, type: 'validation_error', detail: 'failed to decode request' },
  invalid_json: { status: 400, type: 'validation_error', detail: 'failed to parse request: body is not valid JSON' },
  invalid_event: { status: 400, type: 'validation_error', detail: 'an event is not a JSON object' },
  empty_batch: { status: 400, type: 'validation_error', detail: 'request holds no event' },
  missing_distinct_id: { status: 400, type: 'validation_error', detail: 'The distinct_id field is missing from the request.' },
  invalid_token: { status: 400, type: 'validation_error', detail: 'Invalid token' },
  missing_api_key: { status: 401, type: 'authentication_error', detail: 'event submitted without an api_key' },
  invalid_api_key: { status: 401, type: 'authentication_error', detail: 'API key is not valid' },
  unknown_api_key: { status: 401, type: 'authentication_error', detail: 'Project API key invalid. You can find your project API key in your project settings.' },
  inconsistent_api_key: { status: 401, type: 'authentication_error', detail: 'batch submitted with inconsistent api_key values' },
  malformed_request: { status: 400, type: 'invalid_request', detail: 'malformed HTTP/1.1 request' },
  not_found: { status: 404, type: 'invalid_request', detail: 'Endpoint not found.' },
  method_not_allowed: { status: 405, type: 'invalid_request', detail: 'Method not allowed.' },
  body_timeout: { status: 408, type: 'invalid_request', detail: 'the request body did not arrive in time' },
  too_many_uploads: { status: 429, type: 'throttled_error', detail: 'too many request bodies in progress from this address, please retry' },
  rate_limited: { status: 429, type: 'throttled_error', detail: 'rate limit exceeded' },
  payload_too_large: { status: 413, type: 'invalid_request', detail: 'maximum request size exceeded' },
  headers_too_large: { status: 431, type: 'invalid_request', detail: 'request line and headers too large' },
  too_many_events: { status: 413, type: 'invalid_request', detail: 'too many events in one request' },
  event_too_large: { status: 413, type: 'invalid_request', detail: 'maximum event size exceeded' },
  overloaded: { status: 503, type: 'server_error', detail: 'ingest node is at capacity, please retry' },
  unavailable: { status: 503, type: 'server_error', detail: 'transient error, please retry' },
});

export type CaptureErrorCode = keyof typeof captureErrors;

export class CaptureError extends ApiError<CaptureErrorCode> {
  override name = 'CaptureError';
}

export const captureErrorResponse = errorMapper(captureErrors);
