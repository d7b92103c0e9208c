// The answer to a feature-flag call, in the shape the caller asked for. Spate has no feature
// flags, so every shape says "no flags, no errors". PostHog's flags service picks the shape from
// the endpoint and `v` (rust/feature-flags, api/endpoint.rs):
//   /flags/  v ≥ 2 → { flags: {} } (posthog-js 1.x, posthog-node 5.x, posthog-js-lite)
//            v < 2 or none → { featureFlags: {}, featureFlagPayloads: {} }
//   /decide/ v ≥ 4 → as /flags/ v 2;  v 3 → as /flags/ v 1;  v 2 → { featureFlags: {} };
//            v 1 or none → { featureFlags: [] } (the keys of the active flags)
// The remote config joins the answer, at its top level, when `config=true`, on every /decide/
// call, and on a POST /flags/ that names neither `v` nor `config` (then also as v 2).
import { randomUUID } from 'node:crypto';
import type { RemoteConfig } from './remote-config.js';

export type FlagsEndpoint = 'flags' | 'decide';

export interface FlagsCall {
  endpoint: FlagsEndpoint;
  method: 'get' | 'post';
  /** The raw query string, without `?`. */
  query: string;
}

export type FlagsShape = 'flags-v2' | 'legacy' | 'decide-v2' | 'decide-v1';

export interface FlagsPlan {
  shape: FlagsShape;
  withConfig: boolean;
  /** A GET answers without reading a body or a key, as PostHog's does (a fixed, minimal answer). */
  minimal: boolean;
}

/** `v=`'s number as PostHog reads it: absent → undefined, not a number → 1. */
function versionOf(query: URLSearchParams): number | undefined {
  const v = query.get('v') ?? query.get('version');
  if (v === null || v === '') return undefined;
  const n = Number.parseInt(v, 10);
  return Number.isNaN(n) ? 1 : n;
}

function flagOf(query: URLSearchParams, name: string): boolean | undefined {
  const value = query.get(name);
  if (value === null || value === '') return undefined;
  return ['true', '1', 'yes', 'on'].includes(value.toLowerCase());
}

export function planFlagsAnswer(call: FlagsCall): FlagsPlan {
  const query = new URLSearchParams(call.query);
  let version = versionOf(query);
  if (call.method === 'get') return { shape: (version ?? 1) >= 2 ? 'flags-v2' : 'legacy', withConfig: false, minimal: true };
  if (call.endpoint === 'decide') {
    const shape: FlagsShape = version === undefined || version <= 1 ? 'decide-v1' : version === 2 ? 'decide-v2' : version === 3 ? 'legacy' : 'flags-v2';
    return { shape, withConfig: flagOf(query, 'config') ?? true, minimal: false };
  }
  let withConfig = flagOf(query, 'config');
  if (version === undefined && withConfig === undefined) {
    version = 2;
    withConfig = true;
  }
  return { shape: (version ?? 1) >= 2 ? 'flags-v2' : 'legacy', withConfig: withConfig ?? false, minimal: false };
}

/** What older SDKs read from a /decide/-era answer besides the remote config. */
const LEGACY_CONFIG = { config: { enable_collect_everything: true }, toolbarParams: {}, isAuthenticated: false };

/** What a GET /flags/ carries in PostHog: a fixed config, no key needed. */
const MINIMAL_CONFIG = { supportedCompression: ['gzip', 'gzip-js'], ...LEGACY_CONFIG, sessionRecording: false };

/** The answer body. `config` is the project's remote config (unused for a minimal answer). */
export function flagsAnswer(plan: FlagsPlan, config: RemoteConfig | undefined, nowMs: number): Record<string, unknown> {
  const meta = { requestId: randomUUID(), evaluatedAt: nowMs };
  const extra = plan.minimal ? MINIMAL_CONFIG : plan.withConfig && config ? { ...LEGACY_CONFIG, ...config } : {};
  switch (plan.shape) {
    case 'flags-v2':
      return { flags: {}, errorsWhileComputingFlags: false, ...meta, ...extra };
    case 'legacy':
      return { featureFlags: {}, featureFlagPayloads: {}, errorsWhileComputingFlags: false, ...meta, ...extra };
    case 'decide-v2':
      return { featureFlags: {}, ...meta, ...extra };
    case 'decide-v1':
      return { featureFlags: [], ...meta, ...extra };
  }
}
