// Errors as classes with stable codes. Each server declares its codes once in a
// registry (code → status, type, default detail); one mapper turns any thrown value
// into the JSON envelope {"type","code","detail","attr"} that clients see.

export type ErrorType =
  | 'validation_error'
  | 'authentication_error'
  | 'invalid_request'
  | 'throttled_error'
  | 'server_error';

export interface ErrorSpec {
  readonly status: number;
  readonly type: ErrorType;
  /** Default human-readable detail; a thrower may give a more precise one. */
  readonly detail: string;
}

export type ErrorRegistry = Readonly<Record<string, ErrorSpec>>;

export interface ErrorEnvelope {
  type: ErrorType;
  code: string;
  detail: string;
  attr: string | null;
}

/** An error a client is meant to see: its code decides status and envelope. */
export class ApiError<Code extends string = string> extends Error {
  override name = 'ApiError';
  readonly code: Code;
  readonly attr: string | null;
  /** Extra response headers, e.g. Retry-After on 503. */
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: Code,
    detail?: string,
    extra: { attr?: string | null; headers?: Record<string, string> } = {},
    options?: ErrorOptions,
  ) {
    super(detail ?? code, options);
    this.code = code;
    this.attr = extra.attr ?? null;
    this.headers = extra.headers ?? {};
  }
}

const INTERNAL: ErrorSpec = { status: 500, type: 'server_error', detail: 'A server error occurred.' };

/** Builds the mapper of one server: error → { status, headers, envelope }. */
export function errorMapper<R extends ErrorRegistry>(registry: R) {
  return function toResponse(err: unknown): {
    status: number;
    headers: Readonly<Record<string, string>>;
    body: ErrorEnvelope;
  } {
    if (err instanceof ApiError) {
      const code: string = (err as ApiError).code;
      const spec = Object.hasOwn(registry, code) ? registry[code] : undefined;
      if (spec) {
        const detail = err.message === code ? spec.detail : err.message;
        return { status: spec.status, headers: err.headers, body: { type: spec.type, code, detail, attr: err.attr } };
      }
    }
    return { status: INTERNAL.status, headers: {}, body: { type: INTERNAL.type, code: 'error', detail: INTERNAL.detail, attr: null } };
  };
}

/** Type helper so registries keep their literal keys. */
export function defineErrors<R extends ErrorRegistry>(registry: R): R {
  return Object.freeze(registry);
}
