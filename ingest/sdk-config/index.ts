// The SDKs' configuration calls (docs/capture-api.md, "SDK configuration calls"): remote config
// and feature flags, answered as PostHog answers a project with no flags and no remote features.
// Pure: request facts in, answer bodies out; ingest/http/sdk-config-route.ts moves the bytes.
export { configPathOf, type ConfigPath } from './config-path.js';
export { flagsAnswer, planFlagsAnswer, type FlagsCall, type FlagsEndpoint, type FlagsPlan } from './flags-answer.js';
export { readFlagsRequest, type FlagsRequest } from './flags-request.js';
export { NO_SITE_APPS, remoteConfig, remoteConfigScript, type RemoteConfig, type SiteApp, type SiteAppsSource } from './remote-config.js';
