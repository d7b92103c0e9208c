// The isolation boundary plugins run in (docs/plugins.md, "Sandbox").
export { MAX_HOST_CALLS_IN_FLIGHT, Sandbox, SandboxError, type BatchMode, type BatchOutcome, type SandboxBatch, type SandboxErrorCode, type SandboxEvent, type SandboxHost, type SandboxLimits } from './sandbox.js';
export type { EventOutcome } from './results.js';
