// What a parse thread runs (and the event loop, for small plain bodies): request bytes → events
// packed for publishing. Pure: no sockets, no NATS, no thread pool (a lint rule keeps it so).
export { parseCaptureRequest, type ParsedRequest, type ParseLimits, type ParseOptions, type RequestMeta, type RouteKind, type TokenLookup } from './parse-request.js';
export { decodePayload, isPlainJsonRequest, payloadText } from './decode.js';
export { tokenProblem } from './token.js';
export type { Segment } from './line-packer.js';
export { DROP_REASONS, normalizeEvent, type DropReason } from './normalize-event.js';
