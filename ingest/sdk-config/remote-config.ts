// What an SDK learns about its project before it sends anything: PostHog's remote config, as
// `GET /array/<key>/config` (JSON) and `/array/<key>/config.js` (a script) answer it and as
// `/flags/?config=true` and `/decide/` merge it into their answer. Spate evaluates no feature
// flags and runs no session recording, surveys or heatmaps: each is off, so an SDK loads none
// of the scripts or calls that would need them. Site apps are the one remote feature that may
// come from Spate itself (the plugin runtime): they enter through `SiteApp` lists here.

/** A site app the SDK loads and runs in the page (`siteApps` of PostHog's remote config). */
export interface SiteApp {
  id: number;
  /** Where the SDK loads the app's script from. */
  url: string;
}

/** Where a project's site apps come from; none until the plugin runtime serves them. */
export type SiteAppsSource = (projectId: number) => readonly SiteApp[];

export const NO_SITE_APPS: SiteAppsSource = () => [];

/**
 * The remote config of a project, field for field what PostHog answers for a project with no
 * flags and no remote features (posthog/api/test/test_remote_config.py), with session
 * recording off and surveys left out (below). `analytics.endpoint` is left out: SDKs then send to `/e/`, which Spate serves.
 */
export function remoteConfig(token: string, siteApps: readonly SiteApp[]) {
  return {
    token,
    supportedCompression: ['gzip', 'gzip-js'],
    hasFeatureFlags: false,
    captureDeadClicks: false,
    capturePerformance: false,
    autocapture_opt_out: false,
    autocaptureExceptions: false,
    elementsChainAsString: true,
    sessionRecording: false,
    heatmaps: false,
    // No `surveys` key: posthog-js (1.449) loads its surveys script from the API host whenever
    // the key is present, even as false; absent, it loads nothing. PostHog always sends it.
    productTours: false,
    conversations: false,
    defaultIdentifiedOnly: true,
    siteApps: [...siteApps],
  };
}

export type RemoteConfig = ReturnType<typeof remoteConfig>;

/**
 * `config.js`: the script posthog-js loads to find its config (and site apps) in
 * `window._POSTHOG_REMOTE_CONFIG[token]`. The token is one PostHog's token pattern allows
 * (letters, digits, `_`, `-`), so it needs no escaping inside the quotes; JSON does the rest.
 */
export function remoteConfigScript(config: RemoteConfig): string {
  const { siteApps, ...rest } = config;
  return `(function() {
  window._POSTHOG_REMOTE_CONFIG = window._POSTHOG_REMOTE_CONFIG || {};
  window._POSTHOG_REMOTE_CONFIG['${config.token}'] = {
    config: ${JSON.stringify(rest)},
    siteApps: ${JSON.stringify(siteApps)}
  }
})();`;
}
