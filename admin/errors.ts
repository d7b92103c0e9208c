// Every error code the admin API answers with, in one registry (documented in ERRORS.md; a
// test checks that every code here appears there). Throw `new ApiError(code, detail?, {attr})`.
import { ApiError, defineErrors, errorMapper } from '../lib/index.js';

export const adminErrors = defineErrors({
  validation_error: { status: 400, type: 'validation_error', detail: 'Invalid input.' },
  unique: { status: 400, type: 'validation_error', detail: 'This value already exists.' },
  max_length: { status: 400, type: 'validation_error', detail: 'Too many items in one request.' },
  already_verified: { status: 400, type: 'validation_error', detail: 'This domain has already been verified.' },
  verification_required: {
    status: 400,
    type: 'validation_error',
    detail: 'This attribute cannot be updated until the domain is verified.',
  },
  parse_error: { status: 400, type: 'invalid_request', detail: 'Malformed request body.' },
  not_authenticated: { status: 401, type: 'authentication_error', detail: 'Authentication credentials were not provided.' },
  authentication_failed: {
    status: 401,
    type: 'authentication_error',
    detail: 'Personal API key found in request Authorization header is invalid.',
  },
  permission_denied: { status: 403, type: 'authentication_error', detail: 'You do not have permission to perform this action.' },
  not_found: { status: 404, type: 'invalid_request', detail: 'Not found.' },
  method_not_allowed: { status: 405, type: 'invalid_request', detail: 'Method not allowed.' },
  request_too_large: { status: 413, type: 'invalid_request', detail: 'Request body is too large.' },
  unsupported_media_type: { status: 415, type: 'invalid_request', detail: 'Unsupported media type in request.' },
  throttled: { status: 429, type: 'throttled_error', detail: 'Request was throttled.' },
  verification_unavailable: {
    status: 503,
    type: 'server_error',
    detail: 'The DNS records of the domain could not be looked up; try again later.',
  },
});

export type AdminErrorCode = keyof typeof adminErrors;

/** Codes the mapper produces itself (not thrown): anything unexpected becomes 500 `error`. */
export const UNEXPECTED_ERROR_CODE = 'error';

export const toErrorResponse = errorMapper(adminErrors);

export function apiError(code: AdminErrorCode, detail?: string, attr?: string | null): ApiError<AdminErrorCode> {
  return new ApiError(code, detail, { attr: attr ?? null });
}

export const notFound = (): ApiError<AdminErrorCode> => apiError('not_found');

export const insufficientLevel = (): ApiError<AdminErrorCode> =>
  apiError('permission_denied', 'Your organization access level is insufficient.');
