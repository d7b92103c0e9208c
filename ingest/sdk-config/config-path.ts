// `/array/<project key>/config` and `/array/<project key>/config.js`: which key, which form.
// PostHog refuses a key that is not letters, digits, `_` and `-` (at most 200 of them) with 400
// "Invalid token" before looking it up (posthog/api/remote_config.py).

export interface ConfigPath {
  token: string;
  form: 'json' | 'script';
  /** The key has characters or a length PostHog refuses: 400 invalid_token. */
  valid: boolean;
}

const CONFIG_PATH = /^\/array\/([^/]*)\/(config|config\.js)\/?$/;
const TOKEN = /^[A-Za-z0-9_-]{1,200}$/;

/** The config request a path names, or undefined when it names none. */
export function configPathOf(path: string): ConfigPath | undefined {
  const m = CONFIG_PATH.exec(path);
  if (!m) return undefined;
  let token: string;
  try {
    token = decodeURIComponent(m[1]!);
  } catch {
    token = m[1]!;
  }
  return { token, form: m[2] === 'config' ? 'json' : 'script', valid: TOKEN.test(token) };
}
