// Loads the native uWebSockets.js addon for this Node ABI, or fails with a clear message.
// The build we depend on (see package.json alias) would otherwise fall back silently to a
// slow pure-JS server when its binary does not load; we never want that fallback.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as UWS from 'uWebSockets.js';

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';

const require = createRequire(import.meta.url);

function loadNativeUws(): typeof UWS {
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const tried: string[] = [];
  let packageDir: string;
  try {
    packageDir = dirname(require.resolve('uWebSockets.js/package.json'));
  } catch {
    throw new Error('uWebSockets.js is not installed: run `npm run setup` (it is an npm alias in package.json)');
  }
  // Upstream builds keep binaries at the package root; the unofficial build in binaries/.
  for (const candidate of [join(packageDir, file), join(packageDir, 'binaries', file)]) {
    if (!existsSync(candidate)) {
      tried.push(`${candidate} (missing)`);
      continue;
    }
    try {
      return require(candidate) as typeof UWS;
    } catch (err) {
      tried.push(`${candidate} (${(err as Error).message.split('\n')[0]})`);
    }
  }
  throw new Error(
    `no uWebSockets.js binary loads on Node ${process.version} (${process.platform}/${process.arch}, ABI ${process.versions.modules}). ` +
      `Tried:\n  ${tried.join('\n  ')}\nSpate needs a native build for this Node ABI; see docs/development.md, "Platform notes".`,
  );
}

export const uws = loadNativeUws();
